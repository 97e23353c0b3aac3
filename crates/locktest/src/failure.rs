//! How a command fails: a bad argument (exit 2) or a failed run (exit 1).

/// A bad argument: one line on stderr, exit 2.
#[derive(Debug)]
pub struct Usage(pub String);

/// Why a command did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// Bad arguments: exit 2.
    Usage(Usage),
    /// The run failed (torture or scenario violation, I/O error): exit 1.
    Run(String),
}

impl From<Usage> for Failure {
    fn from(u: Usage) -> Self {
        Failure::Usage(u)
    }
}
