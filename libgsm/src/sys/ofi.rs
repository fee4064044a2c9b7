//! libfabric behind safe functions, for the `ofi` fabric: the only file of `libgsm` that names
//! `libfabric_sys`.
//!
//! It wraps exactly what the `ofi` fabric uses: `fi_getinfo` over hints ([`Info`]), one
//! [`Stack`] per rank (fabric, domain, completion queue, address vector, one reliable datagram
//! endpoint, one registered region), message sends and receives for the set-up hello, RMA writes,
//! and completion reads; for segments, regions registered for remote access alone, RMA reads
//! and fetching atomics on 4- and 8-byte words. Each call is one `unsafe` block whose `// SAFETY:` says why
//! its pointers hold; buffer lifetimes that a call cannot check (an operation in flight reads or
//! writes its buffer until its completion) are the caller's, stated on the `unsafe fn`s.
//!
//! It does not decide which provider to use, what the memory holds or what a completion means
//! (`fabric/ofi/`: `provider.rs`, `layout.rs`, `progress.rs`).

use std::ffi::{CStr, CString, c_void};
use std::ptr;

use libfabric_sys as sys;

/// A libfabric error: the negative return value of a call, with what was being done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FiError {
    /// What was being done (`"fi_mr_reg"`, ...).
    pub what: &'static str,
    /// The positive `FI_*` error number.
    pub code: i32,
}

impl std::fmt::Display for FiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed: {}", self.what, strerror(self.code))
    }
}

/// libfabric's text for error number `code` (positive).
pub(crate) fn strerror(code: i32) -> String {
    // SAFETY: fi_strerror returns a pointer to a static string for any number.
    let s = unsafe { sys::fi_strerror(code) };
    if s.is_null() {
        return format!("error {code}");
    }
    // SAFETY: non-null, NUL-terminated, static.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

fn check(what: &'static str, ret: i64) -> Result<i64, FiError> {
    if ret < 0 {
        Err(FiError {
            what,
            code: (-ret) as i32,
        })
    } else {
        Ok(ret)
    }
}

/// `FI_EAGAIN`: the operation could not be queued now; progress and try again.
pub(crate) const EAGAIN: i32 = sys::FI_EAGAIN as i32;
/// `FI_EAVAIL`: an error completion is waiting to be read.
const EAVAIL: i32 = sys::FI_EAVAIL as i32;

/// Capability and flag bits the fabric names.
pub(crate) mod bits {
    use libfabric_sys as sys;
    pub(crate) const MSG: u64 = sys::FI_MSG as u64;
    pub(crate) const RMA: u64 = sys::FI_RMA as u64;
    pub(crate) const READ: u64 = sys::FI_READ as u64;
    pub(crate) const WRITE: u64 = sys::FI_WRITE as u64;
    pub(crate) const REMOTE_READ: u64 = sys::FI_REMOTE_READ as u64;
    pub(crate) const REMOTE_WRITE: u64 = sys::FI_REMOTE_WRITE as u64;
    pub(crate) const SEND: u64 = sys::FI_SEND as u64;
    pub(crate) const RECV: u64 = sys::FI_RECV as u64;
    pub(crate) const REMOTE_CQ_DATA: u64 = sys::FI_REMOTE_CQ_DATA as u64;
    pub(crate) const ATOMIC: u64 = sys::FI_ATOMIC as u64;
    pub(crate) const MR_LOCAL: u32 = sys::FI_MR_LOCAL;
    pub(crate) const MR_VIRT_ADDR: u32 = sys::FI_MR_VIRT_ADDR;
    pub(crate) const MR_ALLOCATED: u32 = sys::FI_MR_ALLOCATED;
    pub(crate) const MR_PROV_KEY: u32 = sys::FI_MR_PROV_KEY;
    pub(crate) const MR_ENDPOINT: u32 = sys::FI_MR_ENDPOINT;
}

/// What one `fi_getinfo` answer offers, copied out of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Offer {
    /// Provider name (`tcp;ofi_rxm`, `shm`, `verbs;ofi_rxm`, ...).
    pub provider: String,
    /// Fabric name (a subnet for tcp).
    pub fabric: String,
    /// Domain name (an interface, a device).
    pub domain: String,
    /// `FI_*` capability bits.
    pub caps: u64,
    /// Endpoint type is `FI_EP_RDM`.
    pub rdm: bool,
    /// Bytes of remote completion data a write may carry.
    pub cq_data_size: usize,
    /// The memory-registration modes it asks for.
    pub mr_mode: u32,
}

/// A list of `fi_getinfo` answers, freed on drop.
#[derive(Debug)]
pub(crate) struct Info(*mut sys::fi_info);

// SAFETY: the list is plain heap data owned by this value; libfabric keeps no reference to it.
unsafe impl Send for Info {}

impl Drop for Info {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the list came from fi_getinfo and is freed once.
            unsafe { sys::fi_freeinfo(self.0) };
        }
    }
}

/// The hints the fabric asks with.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hints {
    /// Only this provider (`fabric_attr->prov_name`), or any.
    pub provider: Option<String>,
    /// Capabilities required (0: none, to list what a provider has).
    pub caps: u64,
    /// Reliable datagram endpoints only.
    pub rdm: bool,
    /// The memory-registration modes this fabric can handle.
    pub mr_mode: u32,
}

impl Info {
    /// `fi_getinfo` for API 1.17 with `hints`. An empty answer (`FI_ENODATA`) is an empty list.
    pub(crate) fn get(hints: &Hints) -> Result<Info, FiError> {
        // SAFETY: fi_allocinfo returns a zeroed fi_info with its attribute structs allocated,
        // or null.
        let h = unsafe { sys::gsm_fi_allocinfo() };
        if h.is_null() {
            return Err(FiError {
                what: "fi_allocinfo",
                code: sys::FI_ENOMEM as i32,
            });
        }
        let hints_owned = Info(h);
        let prov = hints
            .provider
            .as_deref()
            .map(|p| CString::new(p).unwrap_or_default());
        // SAFETY: `h` and its attribute structs are valid (allocated above); the shim copies the
        // provider name into memory that fi_freeinfo frees.
        unsafe {
            (*h).caps = hints.caps;
            (*h).mode = 0;
            (*(*h).domain_attr).mr_mode = hints.mr_mode as i32;
            if hints.rdm {
                (*(*h).ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
            }
            if let Some(p) = &prov {
                check(
                    "strdup",
                    i64::from(sys::gsm_fi_set_prov_name(h, p.as_ptr())),
                )?;
            }
        }
        let mut out: *mut sys::fi_info = ptr::null_mut();
        // SAFETY: valid hints, a valid out pointer; the result list is ours to free.
        let ret = unsafe {
            sys::fi_getinfo(
                sys::GSM_FI_VERSION,
                ptr::null(),
                ptr::null(),
                0,
                h,
                &mut out,
            )
        };
        drop(hints_owned);
        if ret == -(sys::FI_ENODATA as i32) {
            return Ok(Info(ptr::null_mut()));
        }
        check("fi_getinfo", i64::from(ret))?;
        Ok(Info(out))
    }

    /// Each answer, in libfabric's order (best first).
    pub(crate) fn offers(&self) -> Vec<Offer> {
        let mut v = Vec::new();
        let mut p = self.0;
        while !p.is_null() {
            // SAFETY: `p` walks the list fi_getinfo returned, which lives as long as `self`;
            // its attribute pointers are valid for each entry.
            unsafe {
                let i = &*p;
                let fa = &*i.fabric_attr;
                let da = &*i.domain_attr;
                v.push(Offer {
                    provider: c_string(fa.prov_name),
                    fabric: c_string(fa.name),
                    domain: c_string(da.name),
                    caps: i.caps,
                    rdm: (*i.ep_attr).type_ == sys::fi_ep_type_FI_EP_RDM,
                    cq_data_size: da.cq_data_size,
                    mr_mode: da.mr_mode as u32,
                });
                p = i.next;
            }
        }
        v
    }

    /// The `n`th answer alone, as a list of one (for opening).
    fn nth(&self, n: usize) -> *mut sys::fi_info {
        let mut p = self.0;
        for _ in 0..n {
            if p.is_null() {
                break;
            }
            // SAFETY: walking the valid list.
            p = unsafe { (*p).next };
        }
        p
    }
}

fn c_string(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: a non-null name in an fi_info is NUL-terminated and lives as long as the info.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// One completion: the context the operation was posted with, its flags and its remote data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Completion {
    /// The context value given when posting (0 for a remote write's arrival).
    pub context: usize,
    /// `FI_*` flags (`FI_REMOTE_WRITE`, `FI_REMOTE_CQ_DATA`, `FI_RECV`...).
    pub flags: u64,
    /// Bytes received (receives).
    pub len: usize,
    /// Remote completion data.
    pub data: u64,
}

/// A failed operation, from `fi_cq_readerr`.
#[derive(Debug, Clone)]
pub(crate) struct CqFailure {
    /// The context it was posted with.
    pub context: usize,
    /// libfabric's and the provider's explanation.
    pub detail: String,
}

/// One rank's libfabric objects: fabric, domain, completion queue, address vector, endpoint and
/// (once [`Stack::register`] ran) one registered region. Closed in reverse order on drop.
///
/// Used by one thread at a time (`FI_THREAD_DOMAIN`): the set-up thread, then the progress
/// thread it is moved to.
#[derive(Debug)]
pub(crate) struct Stack {
    /// The answer list the objects were opened from (freed last).
    _info: Info,
    fabric: *mut sys::fid_fabric,
    domain: *mut sys::fid_domain,
    cq: *mut sys::fid_cq,
    av: *mut sys::fid_av,
    ep: *mut sys::fid_ep,
    mr: *mut sys::fid_mr,
    desc: *mut c_void,
    /// Regions of [`Stack::expose`] not yet [`Stack::unexpose`]d (closed first on drop).
    exposed: Vec<*mut sys::fid_mr>,
    /// Further registrations (the rendezvous's bodies and read buffers), by the caller's id.
    more: std::collections::HashMap<u64, *mut sys::fid_mr>,
    /// The CQ's wait descriptor, when the provider gives one.
    wait_fd: Option<i32>,
    /// The answer it was opened from.
    pub offer: Offer,
}

// SAFETY: the objects are used by one thread at a time (the struct moves between threads, it is
// never shared), which is what FI_THREAD_DOMAIN asks.
unsafe impl Send for Stack {}

/// A fetching atomic as libfabric names it ([`Stack::word_atomic`]): its `fi_datatype` and
/// `fi_op` (the constants of [`atomics`]); `FI_CSWAP` is posted with `fi_compare_atomic`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WordAtomic {
    pub datatype: sys::fi_datatype,
    pub op: sys::fi_op,
}

/// The datatypes and operations of [`WordAtomic`].
pub(crate) mod atomics {
    use libfabric_sys as sys;
    pub(crate) const INT32: sys::fi_datatype = sys::fi_datatype_FI_INT32;
    pub(crate) const UINT32: sys::fi_datatype = sys::fi_datatype_FI_UINT32;
    pub(crate) const INT64: sys::fi_datatype = sys::fi_datatype_FI_INT64;
    pub(crate) const UINT64: sys::fi_datatype = sys::fi_datatype_FI_UINT64;
    pub(crate) const FLOAT: sys::fi_datatype = sys::fi_datatype_FI_FLOAT;
    pub(crate) const DOUBLE: sys::fi_datatype = sys::fi_datatype_FI_DOUBLE;
    pub(crate) const READ: sys::fi_op = sys::fi_op_FI_ATOMIC_READ;
    pub(crate) const WRITE: sys::fi_op = sys::fi_op_FI_ATOMIC_WRITE;
    pub(crate) const SUM: sys::fi_op = sys::fi_op_FI_SUM;
    pub(crate) const BAND: sys::fi_op = sys::fi_op_FI_BAND;
    pub(crate) const BOR: sys::fi_op = sys::fi_op_FI_BOR;
    pub(crate) const BXOR: sys::fi_op = sys::fi_op_FI_BXOR;
    pub(crate) const MIN: sys::fi_op = sys::fi_op_FI_MIN;
    pub(crate) const MAX: sys::fi_op = sys::fi_op_FI_MAX;
    pub(crate) const CSWAP: sys::fi_op = sys::fi_op_FI_CSWAP;
}

/// The region registered with [`Stack::register`], as peers must address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Registered {
    /// The address peers pass as the target of an RMA: the region's virtual address under
    /// `FI_MR_VIRT_ADDR`, else 0 (offsets).
    pub base: u64,
    /// The key peers pass.
    pub key: u64,
}

/// Completions one [`Stack::poll`] reads at most.
pub(crate) const CQ_BATCH: usize = 32;

impl Stack {
    /// Opens answer `n` of `info`: fabric, domain, a data-format CQ (with a wait descriptor if
    /// `wait` and the provider has one, else wait-less), a table AV and an RDM endpoint bound to
    /// both, enabled.
    pub(crate) fn open(info: Info, n: usize, wait: bool) -> Result<Stack, FiError> {
        let i = info.nth(n);
        assert!(!i.is_null(), "Stack::open: no answer {n}");
        let offer = info.offers().swap_remove(n);
        let mut s = Stack {
            _info: info,
            fabric: ptr::null_mut(),
            domain: ptr::null_mut(),
            cq: ptr::null_mut(),
            av: ptr::null_mut(),
            ep: ptr::null_mut(),
            mr: ptr::null_mut(),
            desc: ptr::null_mut(),
            exposed: Vec::new(),
            more: std::collections::HashMap::new(),
            wait_fd: None,
            offer,
        };
        // SAFETY: `i` is a valid answer that lives in `s.info`; every out pointer is a field of
        // `s`, which closes whatever was opened if a later step fails (Drop).
        unsafe {
            check(
                "fi_fabric",
                i64::from(sys::fi_fabric(
                    (*i).fabric_attr,
                    &mut s.fabric,
                    ptr::null_mut(),
                )),
            )?;
            check(
                "fi_domain",
                i64::from(sys::gsm_fi_domain(s.fabric, i, &mut s.domain)),
            )?;
            let mut attr = sys::fi_cq_attr {
                size: 4096,
                format: sys::fi_cq_format_FI_CQ_FORMAT_DATA,
                wait_obj: if wait {
                    sys::fi_wait_obj_FI_WAIT_FD
                } else {
                    sys::fi_wait_obj_FI_WAIT_NONE
                },
                ..Default::default()
            };
            if !wait {
                check(
                    "fi_cq_open",
                    i64::from(sys::gsm_fi_cq_open(s.domain, &mut attr, &mut s.cq)),
                )?;
            } else if sys::gsm_fi_cq_open(s.domain, &mut attr, &mut s.cq) < 0 {
                attr.wait_obj = sys::fi_wait_obj_FI_WAIT_NONE;
                check(
                    "fi_cq_open",
                    i64::from(sys::gsm_fi_cq_open(s.domain, &mut attr, &mut s.cq)),
                )?;
            } else {
                let mut fd: i32 = -1;
                if sys::gsm_fi_cq_getwait_fd(s.cq, &mut fd) == 0 && fd >= 0 {
                    s.wait_fd = Some(fd);
                }
            }
            let mut av_attr = sys::fi_av_attr {
                type_: sys::fi_av_type_FI_AV_TABLE,
                ..Default::default()
            };
            check(
                "fi_av_open",
                i64::from(sys::gsm_fi_av_open(s.domain, &mut av_attr, &mut s.av)),
            )?;
            check(
                "fi_endpoint",
                i64::from(sys::gsm_fi_endpoint(s.domain, i, &mut s.ep)),
            )?;
            let flags = bits::SEND | bits::RECV;
            check(
                "fi_ep_bind(cq)",
                i64::from(sys::gsm_fi_ep_bind(s.ep, &mut (*s.cq).fid, flags)),
            )?;
            check(
                "fi_ep_bind(av)",
                i64::from(sys::gsm_fi_ep_bind(s.ep, &mut (*s.av).fid, 0)),
            )?;
            check("fi_enable", i64::from(sys::gsm_fi_enable(s.ep)))?;
        }
        Ok(s)
    }

    /// This endpoint's address, for peers to insert.
    pub(crate) fn name(&self) -> Result<Vec<u8>, FiError> {
        let mut buf = vec![0u8; 256];
        let mut len = buf.len();
        // SAFETY: `buf` holds `len` writable bytes; the endpoint is open.
        let ret = unsafe { sys::gsm_fi_getname(self.ep, buf.as_mut_ptr().cast(), &mut len) };
        check("fi_getname", i64::from(ret))?;
        buf.truncate(len);
        Ok(buf)
    }

    /// Registers `len` bytes at `ptr` for local use and remote reads and writes, in the modes
    /// the provider asked for (`FI_MR_ENDPOINT`: bound to the endpoint and enabled;
    /// `FI_MR_PROV_KEY`: the provider's key, else key 1).
    ///
    /// # Safety
    /// `ptr..ptr + len` stays allocated until this stack is dropped (which deregisters it), and
    /// peers may write it at any time in between.
    pub(crate) unsafe fn register(
        &mut self,
        ptr: *mut u8,
        len: usize,
    ) -> Result<Registered, FiError> {
        let access = bits::READ
            | bits::WRITE
            | bits::REMOTE_READ
            | bits::REMOTE_WRITE
            | bits::SEND
            | bits::RECV;
        // SAFETY: the region is valid for the stack's life (this function's contract); the
        // domain and endpoint are open.
        unsafe {
            check(
                "fi_mr_reg",
                i64::from(sys::gsm_fi_mr_reg(
                    self.domain,
                    ptr.cast(),
                    len,
                    access,
                    1,
                    &mut self.mr,
                )),
            )?;
            if self.offer.mr_mode & bits::MR_ENDPOINT != 0 {
                check(
                    "fi_mr_bind",
                    i64::from(sys::gsm_fi_mr_bind_ep(self.mr, self.ep)),
                )?;
                check("fi_mr_enable", i64::from(sys::gsm_fi_mr_enable(self.mr)))?;
            }
            self.desc = sys::gsm_fi_mr_desc(self.mr);
            let base = if self.offer.mr_mode & bits::MR_VIRT_ADDR != 0 {
                ptr as u64
            } else {
                0
            };
            Ok(Registered {
                base,
                key: sys::gsm_fi_mr_key(self.mr),
            })
        }
    }

    /// Registers `len` bytes at `ptr` for remote access only (`FI_REMOTE_READ` and/or
    /// `FI_REMOTE_WRITE` as `read`/`write` say; there is no access flag for atomics alone), under `key`
    /// unless the provider picks keys (`FI_MR_PROV_KEY`). Returns a handle for
    /// [`Stack::unexpose`] and what peers must name. The segments' registration.
    ///
    /// # Safety
    /// `ptr..ptr + len` stays mapped until [`Stack::unexpose`] or the stack's drop, and peers
    /// with the key may read or write it (as the flags allow) at any time in between.
    pub(crate) unsafe fn expose(
        &mut self,
        ptr: *mut u8,
        len: usize,
        read: bool,
        write: bool,
        key: u64,
    ) -> Result<(usize, Registered), FiError> {
        let mut access = 0;
        if read {
            access |= bits::REMOTE_READ;
        }
        if write {
            access |= bits::REMOTE_WRITE;
        }
        // SAFETY: the region stays valid until it is unexposed (this function's contract).
        let mr = unsafe { self.register_region(ptr, len, access, key)? };
        self.exposed.push(mr);
        Ok((mr as usize, self.registered(mr, ptr)))
    }

    /// Closes a region of [`Stack::expose`]: from now on the provider refuses its key.
    pub(crate) fn unexpose(&mut self, handle: usize) {
        if let Some(i) = self.exposed.iter().position(|&m| m as usize == handle) {
            let mr = self.exposed.swap_remove(i);
            // SAFETY: opened by `expose` on this stack and closed once (removed from the list).
            unsafe { sys::gsm_fi_close(mr.cast()) };
        }
    }

    /// Whether the endpoint can fetch-add and swap 64-bit words (`FI_ATOMIC` was granted and
    /// the provider says each operation is valid on `FI_UINT64`): segments then register
    /// atomic regions.
    pub(crate) fn has_word_atomics(&self) -> bool {
        [atomics::SUM, atomics::WRITE].into_iter().all(|op| {
            self.atomic_valid(WordAtomic {
                datatype: atomics::UINT64,
                op,
            })
        })
    }

    /// Whether the provider does `a` on one element (`fi_fetch_atomicvalid`, or
    /// `fi_compare_atomicvalid` for `FI_CSWAP`), with `FI_ATOMIC` granted.
    pub(crate) fn atomic_valid(&self, a: WordAtomic) -> bool {
        if self.offer.caps & bits::ATOMIC == 0 {
            return false;
        }
        let mut n = 0usize;
        // SAFETY: the endpoint is open; `n` is a valid out pointer.
        let r = unsafe {
            if a.op == atomics::CSWAP {
                sys::gsm_fi_compare_atomicvalid(self.ep, a.datatype, a.op, &mut n)
            } else {
                sys::gsm_fi_fetch_atomicvalid(self.ep, a.datatype, a.op, &mut n)
            }
        };
        r == 0 && n >= 1
    }

    /// Writes `len` bytes at `buf` (memory not registered: callers do not use this when the
    /// provider asks `FI_MR_LOCAL`) to `addr` (key `key`) of `dest`.
    ///
    /// # Safety
    /// `buf..buf + len` stays valid and unchanged until the completion with `context` is read.
    pub(crate) unsafe fn write_unregistered(
        &mut self,
        buf: *const u8,
        len: usize,
        dest: u64,
        addr: u64,
        key: u64,
        context: usize,
    ) -> Result<(), FiError> {
        // SAFETY: as this function's contract; the endpoint is open.
        let r = unsafe {
            sys::gsm_fi_write(
                self.ep,
                buf.cast(),
                len,
                ptr::null_mut(),
                dest,
                addr,
                key,
                context as *mut c_void,
            )
        };
        check("fi_write", r as i64).map(drop)
    }

    /// Registers `len` bytes at `ptr` under `id` (unique among this stack's registrations, at
    /// least 2: it is also the requested key, and the region has key 1): for peers to read
    /// (`remote`), or as the local buffer of reads (`FI_MR_LOCAL`). Returns where peers address
    /// it, and the local descriptor.
    ///
    /// # Safety
    /// `ptr..ptr + len` stays allocated until [`Stack::deregister`] of `id` or the stack's drop.
    pub(crate) unsafe fn register_more(
        &mut self,
        id: u64,
        ptr: *const u8,
        len: usize,
        remote: bool,
    ) -> Result<(Registered, *mut c_void), FiError> {
        debug_assert!(id >= 2 && !self.more.contains_key(&id));
        let access = if remote {
            bits::REMOTE_READ
        } else {
            bits::READ | bits::WRITE
        };
        // SAFETY: the memory stays valid until deregistered (this function's contract).
        let mr = unsafe { self.register_region(ptr, len, access, id)? };
        self.more.insert(id, mr);
        // SAFETY: `mr` is open (it was just registered).
        let desc = unsafe { sys::gsm_fi_mr_desc(mr) };
        Ok((self.registered(mr, ptr), desc))
    }

    /// Registers `len` bytes at `ptr` with `access` under `key` (unless the provider picks keys)
    /// and binds and enables the region where the provider asks (`FI_MR_ENDPOINT`); what
    /// [`Stack::expose`] and [`Stack::register_more`] share. The caller keeps and closes it.
    ///
    /// # Safety
    /// `ptr..ptr + len` stays valid until the returned region is closed.
    unsafe fn register_region(
        &mut self,
        ptr: *const u8,
        len: usize,
        access: u64,
        key: u64,
    ) -> Result<*mut sys::fid_mr, FiError> {
        let mut mr: *mut sys::fid_mr = ptr::null_mut();
        // SAFETY: the memory is valid (this function's contract); the domain and endpoint are
        // open; `mr` is closed here on a failed bind.
        unsafe {
            check(
                "fi_mr_reg",
                i64::from(sys::gsm_fi_mr_reg(
                    self.domain,
                    ptr.cast(),
                    len,
                    access,
                    key,
                    &mut mr,
                )),
            )?;
            if self.offer.mr_mode & bits::MR_ENDPOINT != 0 {
                let r = check("fi_mr_bind", i64::from(sys::gsm_fi_mr_bind_ep(mr, self.ep)))
                    .and_then(|_| check("fi_mr_enable", i64::from(sys::gsm_fi_mr_enable(mr))));
                if let Err(e) = r {
                    sys::gsm_fi_close(mr.cast());
                    return Err(e);
                }
            }
        }
        Ok(mr)
    }

    /// What peers name to reach region `mr` registered at `ptr` (its address only where the
    /// provider wants virtual addresses, `FI_MR_VIRT_ADDR`; else offsets from 0).
    fn registered(&self, mr: *mut sys::fid_mr, ptr: *const u8) -> Registered {
        let base = if self.offer.mr_mode & bits::MR_VIRT_ADDR != 0 {
            ptr as u64
        } else {
            0
        };
        // SAFETY: `mr` is an open region of this stack.
        let key = unsafe { sys::gsm_fi_mr_key(mr) };
        Registered { base, key }
    }

    /// Undoes [`Stack::register_more`] of `id` (unknown ids are ignored).
    pub(crate) fn deregister(&mut self, id: u64) {
        if let Some(mr) = self.more.remove(&id) {
            // SAFETY: opened by `register_more` and closed once (removed from the table).
            unsafe { sys::gsm_fi_close(mr.cast()) };
        }
    }

    /// Whether buffers of local operations must be registered (`FI_MR_LOCAL`).
    pub(crate) fn local_mr(&self) -> bool {
        self.offer.mr_mode & bits::MR_LOCAL != 0
    }

    /// Reads `len` bytes at `addr` (key `key`) of `src` into `buf`. `Err` with [`EAGAIN`] means
    /// "progress, then try again".
    ///
    /// # Safety
    /// `buf..buf + len` is writable, untouched by anyone else until the completion with
    /// `context` is read, and registered with `desc` when [`Stack::local_mr`].
    #[allow(clippy::too_many_arguments, reason = "the arguments of fi_read")]
    pub(crate) unsafe fn read(
        &mut self,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        src: u64,
        addr: u64,
        key: u64,
        context: usize,
    ) -> Result<(), FiError> {
        // SAFETY: as this function's contract; the endpoint is open.
        let r = unsafe {
            sys::gsm_fi_read(
                self.ep,
                buf.cast(),
                len,
                desc,
                src,
                addr,
                key,
                context as *mut c_void,
            )
        };
        check("fi_read", r as i64).map(drop)
    }

    /// A fetching atomic `kind` on the word at `addr` (key `key`) of `dest`, with the operand
    /// in `words[0]` (for `FI_CSWAP`: the word compared with `words[0]` and `words[1]` stored);
    /// the old word lands in `words[2]`. A 4-byte type uses each word's first 4 bytes.
    ///
    /// # Safety
    /// `words` stays valid and untouched until the completion with `context` is read.
    pub(crate) unsafe fn word_atomic(
        &mut self,
        kind: WordAtomic,
        words: *mut [u64; 3],
        dest: u64,
        addr: u64,
        key: u64,
        context: usize,
    ) -> Result<(), FiError> {
        let ctx = context as *mut c_void;
        // SAFETY: as this function's contract: three words, the operand first.
        let r = unsafe {
            let w = words.cast::<u64>();
            let null = ptr::null_mut();
            if kind.op == atomics::CSWAP {
                sys::gsm_fi_compare_atomic(
                    self.ep,
                    w.add(1).cast(),
                    1,
                    null,
                    w.cast(),
                    null,
                    w.add(2).cast(),
                    null,
                    dest,
                    addr,
                    key,
                    kind.datatype,
                    kind.op,
                    ctx,
                )
            } else {
                sys::gsm_fi_fetch_atomic(
                    self.ep,
                    w.cast(),
                    1,
                    null,
                    w.add(2).cast(),
                    null,
                    dest,
                    addr,
                    key,
                    kind.datatype,
                    kind.op,
                    ctx,
                )
            }
        };
        check("fi_fetch_atomic", r as i64).map(drop)
    }

    /// Inserts a peer's endpoint address; returns its `fi_addr_t`.
    pub(crate) fn insert(&mut self, addr: &[u8]) -> Result<u64, FiError> {
        let mut out: sys::fi_addr_t = sys::FI_ADDR_UNSPEC_VALUE;
        // SAFETY: `addr` is readable; libfabric copies it. One address, one out slot.
        let ret = unsafe { sys::gsm_fi_av_insert(self.av, addr.as_ptr().cast(), 1, &mut out) };
        if ret != 1 {
            return Err(FiError {
                what: "fi_av_insert",
                code: if ret < 0 { -ret } else { sys::FI_EINVAL as i32 },
            });
        }
        Ok(out)
    }

    /// Posts a receive of up to `len` bytes into `buf`, from any peer.
    ///
    /// # Safety
    /// `buf..buf + len` lies in the registered region and is not touched until the completion
    /// with `context` is read.
    pub(crate) unsafe fn recv(
        &mut self,
        buf: *mut u8,
        len: usize,
        context: usize,
    ) -> Result<(), FiError> {
        // SAFETY: as this function's contract; the endpoint is open.
        let r = unsafe {
            sys::gsm_fi_recv(
                self.ep,
                buf.cast(),
                len,
                self.desc,
                sys::FI_ADDR_UNSPEC_VALUE,
                context as *mut c_void,
            )
        };
        check("fi_recv", r as i64).map(drop)
    }

    /// Sends `len` bytes at `buf` to `dest`.
    ///
    /// # Safety
    /// `buf..buf + len` lies in the registered region and stays unchanged until the completion
    /// with `context` is read.
    pub(crate) unsafe fn send(
        &mut self,
        buf: *const u8,
        len: usize,
        dest: u64,
        context: usize,
    ) -> Result<(), FiError> {
        // SAFETY: as this function's contract.
        let r = unsafe {
            sys::gsm_fi_send(
                self.ep,
                buf.cast(),
                len,
                self.desc,
                dest,
                context as *mut c_void,
            )
        };
        check("fi_send", r as i64).map(drop)
    }

    /// Writes `len` bytes at `buf` to `addr` (key `key`) of `dest`, with remote completion data
    /// `data` when given. `Err` with [`EAGAIN`] means "progress, then try again".
    ///
    /// # Safety
    /// `buf..buf + len` lies in the registered region and stays unchanged until the completion
    /// with `context` is read.
    #[allow(clippy::too_many_arguments, reason = "the arguments of fi_writedata")]
    pub(crate) unsafe fn write(
        &mut self,
        buf: *const u8,
        len: usize,
        data: Option<u64>,
        dest: u64,
        addr: u64,
        key: u64,
        context: usize,
    ) -> Result<(), FiError> {
        let ctx = context as *mut c_void;
        // SAFETY: as this function's contract; the endpoint is open.
        let r = unsafe {
            match data {
                Some(d) => sys::gsm_fi_writedata(
                    self.ep,
                    buf.cast(),
                    len,
                    self.desc,
                    d,
                    dest,
                    addr,
                    key,
                    ctx,
                ),
                None => {
                    sys::gsm_fi_write(self.ep, buf.cast(), len, self.desc, dest, addr, key, ctx)
                }
            }
        };
        check("fi_writedata", r as i64).map(drop)
    }

    /// Reads completions into `out` (at most [`CQ_BATCH`]; also drives the provider's
    /// progress); `Ok(0)` when none.
    /// A failed operation comes back as `Err`.
    pub(crate) fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize, CqFailure> {
        let mut buf = [sys::fi_cq_data_entry::default(); CQ_BATCH];
        // SAFETY: `buf` has room for CQ_BATCH entries of the CQ's format (FI_CQ_FORMAT_DATA).
        let n = unsafe { sys::gsm_fi_cq_read(self.cq, buf.as_mut_ptr().cast(), buf.len()) };
        if n == -(EAVAIL as isize) {
            return Err(self.failure());
        }
        if n <= 0 {
            return Ok(0);
        }
        for e in &buf[..n as usize] {
            out.push(Completion {
                context: e.op_context as usize,
                flags: e.flags,
                len: e.len,
                data: e.data,
            });
        }
        Ok(n as usize)
    }

    fn failure(&mut self) -> CqFailure {
        let mut e = sys::fi_cq_err_entry::default();
        // SAFETY: one error entry; the CQ is open.
        let r = unsafe { sys::gsm_fi_cq_readerr(self.cq, &mut e, 0) };
        if r < 0 {
            return CqFailure {
                context: 0,
                detail: format!("fi_cq_readerr: {}", strerror((-r) as i32)),
            };
        }
        let mut text = [0 as std::os::raw::c_char; 256];
        // SAFETY: the entry was just filled by the provider; `text` has room for 256 bytes.
        let prov = unsafe {
            c_string(sys::gsm_fi_cq_strerror(
                self.cq,
                e.prov_errno,
                e.err_data,
                text.as_mut_ptr(),
                text.len(),
            ))
        };
        CqFailure {
            context: e.op_context as usize,
            detail: format!("{} ({prov})", strerror(e.err)),
        }
    }

    /// The CQ's wait descriptor, if the provider gives one (register it once with epoll).
    pub(crate) fn cq_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        // SAFETY: the descriptor belongs to the CQ, which outlives the borrow of `self`.
        self.wait_fd
            .map(|fd| unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) })
    }

    /// `fi_trywait` on the CQ: `true` when nothing is pending and the caller may sleep on
    /// [`Stack::cq_fd`].
    pub(crate) fn trywait(&mut self) -> bool {
        // SAFETY: the fabric and CQ are open.
        self.wait_fd.is_some() && unsafe { sys::gsm_fi_trywait_cq(self.fabric, self.cq) } == 0
    }

    /// Whether the CQ has a wait descriptor at all.
    pub(crate) fn can_wait(&self) -> bool {
        self.wait_fd.is_some()
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: each object was opened by this stack and is closed once, dependants first
        // (memory region and endpoint before the AV and CQ they are bound to, then the domain
        // and the fabric).
        unsafe {
            for mr in self.exposed.drain(..) {
                sys::gsm_fi_close(mr.cast());
            }
            for (_, mr) in self.more.drain() {
                sys::gsm_fi_close(mr.cast());
            }
            for fid in [
                self.mr.cast::<sys::fid>(),
                self.ep.cast(),
                self.av.cast(),
                self.cq.cast(),
                self.domain.cast(),
                self.fabric.cast(),
            ] {
                if !fid.is_null() {
                    sys::gsm_fi_close(fid);
                }
            }
        }
    }
}
