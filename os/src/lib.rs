//! What every oae process asks of the operating system, in one place: CPU
//! pinning (`pin`), child processes ended by their own PIDs (`child`), the
//! CPU time they and this process use (`cpu`), the memory it may have
//! (`memory`), private working directories for what tools write
//! (`private_dir`), locks held for a process's life (`lock`), and TCP
//! listeners (`tcp`).

pub mod child;
pub mod cpu;
pub mod lock;
pub mod memory;
pub mod netns;
pub mod pin;
pub mod private_dir;
pub mod process;
pub mod tcp;
