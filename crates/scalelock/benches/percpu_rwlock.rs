//! PerCpuRwLock benchmark (being written).
fn main() {}
