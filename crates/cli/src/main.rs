//! The `compactbench` binary.
#![allow(clippy::print_stdout, clippy::print_stderr)]

fn main() {
    println!("compactbench");
}
