//! The operating system, behind one door: every system call the runtime makes is a safe function
//! here (on `rustix` where it covers the call, `libc` where it does not), so that the logic above
//! holds no FFI and a port to another system touches only this folder. See ARCHITECTURE.md.
//!
//! One file per kind of resource; each function returns `std::io::Result` (or a plain value
//! where the call cannot fail) and documents what it does not check.

// Each file is owned by one part of the runtime: memory and stacks, the shm fabric's segments,
// sockets and polling, other processes, signals, threads and futexes, the binary's own image.
pub(crate) mod far;
pub(crate) mod image;
pub(crate) mod mem;
pub(crate) mod net;
#[cfg(feature = "ofi")]
pub(crate) mod ofi;
pub(crate) mod proc;
pub(crate) mod segmem;
pub(crate) mod shm;
pub(crate) mod signal;
pub(crate) mod thread;
#[cfg(feature = "rdma")]
pub(crate) mod verbs;
