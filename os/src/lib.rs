//! What every oae process asks of the operating system, in one place: CPU
//! pinning (`pin`), child processes ended by their own PIDs (`child`), and
//! the CPU time they and this process use (`cpu`).

pub mod child;
pub mod cpu;
pub mod pin;
