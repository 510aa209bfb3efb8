//! Addresses to functions, files and lines: native (ELF + DWARF), kernel, JIT maps.
//! (Being built: see the sampler work item.)
