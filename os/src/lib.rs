//! What every oae process asks of the operating system, in one place: CPU
//! pinning (`pin`) and child processes ended by their own PIDs (`child`).

pub mod child;
pub mod pin;
