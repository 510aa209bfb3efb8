//! The `profmap` binary: hands the arguments to `profmap::run` and exits with its code.

fn main() {
    let code = profmap::run(std::env::args_os().collect());
    std::process::exit(code);
}
