//! qs-reports: HTML reports with plots for qsim runs and sweeps.
//!
//! Empty until the simulator writes traces for it to read.
