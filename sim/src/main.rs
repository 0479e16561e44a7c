//! `qsim`: the command line of the deterministic simulator.
//!
//! The simulator is not built yet. Until it is, `qsim` refuses every command loudly rather
//! than pretend to run a scenario.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "qsim: the simulator is not implemented yet; this build has only the node's storage core.\n\
         qsim: run `./ci/main-job.sh` for the write-amplification benchmark, or `./ci/test.sh` for the tests."
    );
    ExitCode::from(70) // EX_SOFTWARE: nothing was run
}
