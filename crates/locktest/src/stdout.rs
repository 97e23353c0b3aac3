//! Writing results to stdout.

use std::io::Write as _;

/// Writes to stdout. A closed stdout (`locktest | head`) is not an error
/// worth a panic: the results still go to the JSON file.
pub fn emit(text: &str) {
    // Unit tests: through `print!`, which the test harness captures.
    if cfg!(test) {
        print!("{text}");
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}
