//! RDMA devices through rdma-core's verbs (crate `rdma-sys`, cargo feature `rdma`): the only file
//! of `libgsm` that names `rdma_sys`. Today it only lists the devices, which is what
//! `GSM_FABRIC=verbs` checks at start; it opens nothing.

use std::ffi::CStr;

/// Where rdma-core finds devices, for messages: the kernel's InfiniBand class directory.
pub(crate) const DEVICE_DIR: &str = "/sys/class/infiniband";

/// The names of the RDMA devices `ibv_get_device_list` reports (empty when there are none, or
/// when the kernel has no RDMA support).
pub(crate) fn devices() -> Vec<String> {
    let mut n: std::os::raw::c_int = 0;
    // SAFETY: ibv_get_device_list writes the count through a valid pointer and returns a
    // NULL-terminated array (or NULL), freed below with ibv_free_device_list.
    let list = unsafe { rdma_sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Vec::new();
    }
    let mut names = Vec::with_capacity(n.max(0) as usize);
    for i in 0..n.max(0) as usize {
        // SAFETY: `i < n` entries of the array are valid devices; their names are static
        // NUL-terminated strings owned by rdma-core while the list lives.
        unsafe {
            let dev = *list.add(i);
            let name = rdma_sys::ibv_get_device_name(dev);
            if !name.is_null() {
                names.push(CStr::from_ptr(name).to_string_lossy().into_owned());
            }
        }
    }
    // SAFETY: the list came from ibv_get_device_list and is freed once, after its last use.
    unsafe { rdma_sys::ibv_free_device_list(list) };
    names
}
