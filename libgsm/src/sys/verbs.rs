//! RDMA verbs through rdma-core (crate `rdma-sys`, cargo feature `rdma`): the only file of
//! `libgsm` that names `rdma_sys`. Safe wrappers for what the `verbs` fabric uses: the device list,
//! one opened device and port ([`Stack::open`]), its protection domain, a completion queue with a
//! completion channel, one registered region, RC queue pairs and their state transitions
//! ([`Transition`]), RDMA WRITE (with immediate) and receive posting, polling and arming the
//! completion queue. It knows nothing of rings; `fabric/verbs` does.
//!
//! On a machine without an RDMA device only [`devices`] and the failing [`Stack::open`] run;
//! everything past the open is compile-checked (see ARCHITECTURE.md, the verbs fabric).

use std::ffi::CStr;
use std::os::fd::BorrowedFd;
use std::ptr;

use rdma_sys as ib;

/// Where rdma-core finds devices, for messages: the kernel's InfiniBand class directory.
pub(crate) const DEVICE_DIR: &str = "/sys/class/infiniband";

/// `IBV_LINK_LAYER_ETHERNET` of verbs.h (RoCE: the address is a GID, never a LID).
pub(crate) const LINK_LAYER_ETHERNET: u8 = 2;
/// `IBV_PORT_ACTIVE`.
const PORT_ACTIVE: u32 = ib::ibv_port_state::IBV_PORT_ACTIVE;

/// A failed verbs call: what was being done and the error rdma-core gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VerbsError {
    pub what: String,
    pub detail: String,
}

impl std::fmt::Display for VerbsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.detail)
    }
}

fn errno(what: impl Into<String>) -> VerbsError {
    VerbsError {
        what: what.into(),
        detail: std::io::Error::last_os_error().to_string(),
    }
}

fn code(what: impl Into<String>, rc: i32) -> VerbsError {
    VerbsError {
        what: what.into(),
        detail: std::io::Error::from_raw_os_error(rc.abs()).to_string(),
    }
}

/// The names of the RDMA devices `ibv_get_device_list` reports (empty when there are none, or
/// when the kernel has no RDMA support).
#[cfg(test)]
pub(crate) fn devices() -> Vec<String> {
    DeviceList::get().names()
}

/// The device list, freed on drop.
struct DeviceList {
    list: *mut *mut ib::ibv_device,
    n: usize,
}

impl DeviceList {
    fn get() -> DeviceList {
        let mut n: std::os::raw::c_int = 0;
        // SAFETY: ibv_get_device_list writes the count through a valid pointer and returns a
        // NULL-terminated array (or NULL), freed in Drop with ibv_free_device_list.
        let list = unsafe { ib::ibv_get_device_list(&mut n) };
        DeviceList {
            list,
            n: if list.is_null() { 0 } else { n.max(0) as usize },
        }
    }

    fn device(&self, i: usize) -> *mut ib::ibv_device {
        assert!(i < self.n);
        // SAFETY: `i < n` entries of the array are valid devices while the list lives.
        unsafe { *self.list.add(i) }
    }

    fn names(&self) -> Vec<String> {
        (0..self.n)
            .map(|i| {
                // SAFETY: a valid device; its name is a NUL-terminated string owned by
                // rdma-core while the list lives (copied out here).
                unsafe {
                    let name = ib::ibv_get_device_name(self.device(i));
                    if name.is_null() {
                        String::new()
                    } else {
                        CStr::from_ptr(name).to_string_lossy().into_owned()
                    }
                }
            })
            .collect()
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        if !self.list.is_null() {
            // SAFETY: the list came from ibv_get_device_list and is freed once.
            unsafe { ib::ibv_free_device_list(self.list) };
        }
    }
}

/// What was looked for and not found by [`Stack::open`], for the one-line start-up error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpenError {
    /// No device at all.
    NoDevice,
    /// The named device is not among those found.
    NotFound { wanted: String, found: Vec<String> },
    /// Devices exist, but none (or not the named one) has an active port.
    NoActivePort { looked_at: Vec<String> },
    /// A call failed.
    Call(VerbsError),
}

/// The port this rank uses and its addressing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Port {
    pub device: String,
    pub num: u8,
    pub lid: u16,
    pub link_layer: u8,
    /// `ibv_mtu` value (1 = 256 B ... 5 = 4096 B).
    pub active_mtu: u32,
    pub gid: [u8; 16],
    pub gid_index: u8,
    /// Device limits: work requests per queue, completion-queue entries.
    pub max_qp_wr: u32,
    pub max_cqe: u32,
}

/// A transition of an RC queue pair, as plain values (`fabric/verbs` decides them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Transition {
    /// RESET -> INIT: the port and the peer's rights (remote write).
    Init { port: u8 },
    /// INIT -> RTR: the peer's queue pair and address.
    Rtr {
        port: u8,
        path_mtu: u32,
        dest_qpn: u32,
        rq_psn: u32,
        dlid: u16,
        /// Routed by GID (RoCE, or another subnet): the peer's GID and this port's GID index.
        global: Option<([u8; 16], u8)>,
    },
    /// RTR -> RTS: this side's first sequence number.
    Rts { sq_psn: u32 },
}

/// What an attribute mask of a transition holds, with the values it sets: a pure function so
/// that the masks verbs demands for each state can be checked without a device.
pub(crate) fn attributes(t: &Transition) -> (ib::ibv_qp_attr, u32) {
    use ib::ibv_qp_attr_mask as m;
    // SAFETY: ibv_qp_attr is plain C data (integers, a union of byte arrays); all-zero is the
    // documented "unset" value of each field.
    let mut a: ib::ibv_qp_attr = unsafe { std::mem::zeroed() };
    let mask = match t {
        Transition::Init { port } => {
            a.qp_state = ib::ibv_qp_state::IBV_QPS_INIT;
            a.pkey_index = 0;
            a.port_num = *port;
            a.qp_access_flags = (ib::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
                | ib::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE)
                .0;
            m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_ACCESS_FLAGS
        }
        Transition::Rtr {
            port,
            path_mtu,
            dest_qpn,
            rq_psn,
            dlid,
            global,
        } => {
            a.qp_state = ib::ibv_qp_state::IBV_QPS_RTR;
            a.path_mtu = *path_mtu;
            a.dest_qp_num = *dest_qpn;
            a.rq_psn = *rq_psn;
            // No RDMA READ or atomics: one responder resource is enough.
            a.max_dest_rd_atomic = 1;
            // 12: 0.64 ms before the sender retries a write that found no receive posted.
            a.min_rnr_timer = 12;
            a.ah_attr.dlid = *dlid;
            a.ah_attr.port_num = *port;
            if let Some((gid, index)) = global {
                a.ah_attr.is_global = 1;
                a.ah_attr.grh.dgid.raw = *gid;
                a.ah_attr.grh.sgid_index = *index;
                a.ah_attr.grh.hop_limit = 64;
            }
            m::IBV_QP_STATE
                | m::IBV_QP_AV
                | m::IBV_QP_PATH_MTU
                | m::IBV_QP_DEST_QPN
                | m::IBV_QP_RQ_PSN
                | m::IBV_QP_MAX_DEST_RD_ATOMIC
                | m::IBV_QP_MIN_RNR_TIMER
        }
        Transition::Rts { sq_psn } => {
            a.qp_state = ib::ibv_qp_state::IBV_QPS_RTS;
            a.sq_psn = *sq_psn;
            // 14: 4.096 µs × 2^14 = 67 ms per try, 7 tries: a peer that is gone fails the
            // write (and the job) within about half a second.
            a.timeout = 14;
            a.retry_cnt = 7;
            // 7: retry forever while the peer has no receive posted (it reposts in its turn).
            a.rnr_retry = 7;
            a.max_rd_atomic = 1;
            m::IBV_QP_STATE
                | m::IBV_QP_TIMEOUT
                | m::IBV_QP_RETRY_CNT
                | m::IBV_QP_RNR_RETRY
                | m::IBV_QP_SQ_PSN
                | m::IBV_QP_MAX_QP_RD_ATOMIC
        }
    };
    (a, mask.0)
}

/// One RDMA WRITE of a chain: `len` bytes at `local` (in the registered region) to `remote` of
/// the peer's region (`rkey`), with an immediate (which consumes a receive at the peer and
/// completes there) or without; `signaled` asks for a completion here with `wr_id`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Write {
    pub local: *const u8,
    pub len: u32,
    pub remote: u64,
    pub rkey: u32,
    pub imm: Option<u32>,
    pub signaled: bool,
    pub wr_id: u64,
}

/// One completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Completion {
    pub wr_id: u64,
    pub qp_num: u32,
    /// `None` when it succeeded, else rdma-core's words for the status.
    pub failed: Option<&'static str>,
    /// A write with immediate arrived (its immediate, host order).
    pub imm: Option<u32>,
    /// The status was `IBV_WC_WR_FLUSH_ERR` (the queue pair is in error: flushed, not failed).
    pub flushed: bool,
}

/// The opened device and everything made on it, destroyed in reverse order on drop.
#[derive(Debug)]
pub(crate) struct Stack {
    ctx: *mut ib::ibv_context,
    pd: *mut ib::ibv_pd,
    channel: *mut ib::ibv_comp_channel,
    cq: *mut ib::ibv_cq,
    mr: *mut ib::ibv_mr,
    qps: Vec<*mut ib::ibv_qp>,
    unacked: u32,
    /// The port in use.
    pub port: Port,
}

// SAFETY: rdma-core's verbs objects may be used from any thread; the stack is used by one
// thread at a time (moved to the fabric's progress thread after set-up).
unsafe impl Send for Stack {}

impl Stack {
    /// Opens `wanted` (or every device in turn), and its first active port, with GID `gid_index`;
    /// then its protection domain and a completion channel.
    pub(crate) fn open(wanted: Option<&str>, gid_index: u8) -> Result<Stack, OpenError> {
        let list = DeviceList::get();
        let names = list.names();
        if names.is_empty() {
            return Err(OpenError::NoDevice);
        }
        let candidates: Vec<usize> = match wanted {
            Some(w) => match names.iter().position(|n| n == w) {
                Some(i) => vec![i],
                None => {
                    return Err(OpenError::NotFound {
                        wanted: w.to_string(),
                        found: names,
                    });
                }
            },
            None => (0..names.len()).collect(),
        };
        for &i in &candidates {
            // SAFETY: a device of the live list.
            let ctx = unsafe { ib::ibv_open_device(list.device(i)) };
            if ctx.is_null() {
                return Err(OpenError::Call(errno(format!(
                    "opening device {}",
                    names[i]
                ))));
            }
            match active_port(ctx, &names[i], gid_index) {
                Ok(Some(port)) => return Self::on(ctx, port).map_err(OpenError::Call),
                Ok(None) => {}
                Err(e) => {
                    // SAFETY: opened above, nothing made on it.
                    unsafe { ib::ibv_close_device(ctx) };
                    return Err(OpenError::Call(e));
                }
            }
            // SAFETY: as above.
            unsafe { ib::ibv_close_device(ctx) };
        }
        Err(OpenError::NoActivePort {
            looked_at: candidates.iter().map(|&i| names[i].clone()).collect(),
        })
    }

    fn on(ctx: *mut ib::ibv_context, port: Port) -> Result<Stack, VerbsError> {
        let mut s = Stack {
            ctx,
            pd: ptr::null_mut(),
            channel: ptr::null_mut(),
            cq: ptr::null_mut(),
            mr: ptr::null_mut(),
            qps: Vec::new(),
            unacked: 0,
            port,
        };
        // SAFETY: an open context; the results are checked and owned by `s` (freed in Drop).
        unsafe {
            s.pd = ib::ibv_alloc_pd(ctx);
            if s.pd.is_null() {
                return Err(errno("allocating a protection domain"));
            }
            s.channel = ib::ibv_create_comp_channel(ctx);
            if s.channel.is_null() {
                return Err(errno("creating a completion channel"));
            }
        }
        set_nonblocking(s.channel_fd()).map_err(|e| VerbsError {
            what: "making the completion channel non-blocking".into(),
            detail: e.to_string(),
        })?;
        Ok(s)
    }

    /// The completion channel's descriptor (readable when an armed CQ got a completion).
    pub(crate) fn channel_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the channel lives as long as `self`, and so does its descriptor.
        unsafe { BorrowedFd::borrow_raw((*self.channel).fd) }
    }

    /// Creates the completion queue (`entries`), tied to the channel.
    pub(crate) fn create_cq(&mut self, entries: u32) -> Result<(), VerbsError> {
        // SAFETY: an open context and channel; the CQ is owned by `self`.
        self.cq = unsafe {
            ib::ibv_create_cq(self.ctx, entries as i32, ptr::null_mut(), self.channel, 0)
        };
        if self.cq.is_null() {
            return Err(errno(format!("creating a completion queue of {entries}")));
        }
        Ok(())
    }

    /// Registers `len` bytes at `addr` for local use and remote writes; returns (lkey, rkey).
    ///
    /// # Safety
    /// The memory must stay allocated until this stack is dropped.
    pub(crate) unsafe fn register(
        &mut self,
        addr: *mut u8,
        len: usize,
    ) -> Result<(u32, u32), VerbsError> {
        let access = (ib::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ib::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE)
            .0 as i32;
        // SAFETY: the caller keeps the memory alive; the MR is owned by `self`.
        self.mr = unsafe { ib::ibv_reg_mr(self.pd, addr.cast(), len, access) };
        if self.mr.is_null() {
            return Err(errno(format!("registering {len} bytes")));
        }
        // SAFETY: a registered MR.
        Ok(unsafe { ((*self.mr).lkey, (*self.mr).rkey) })
    }

    /// Creates an RC queue pair on the CQ; returns its index here and its number.
    pub(crate) fn create_qp(&mut self, send: u32, recv: u32) -> Result<(usize, u32), VerbsError> {
        // SAFETY: plain C data, zero is "unset".
        let mut init: ib::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = self.cq;
        init.recv_cq = self.cq;
        init.qp_type = ib::ibv_qp_type::IBV_QPT_RC;
        init.cap.max_send_wr = send;
        init.cap.max_recv_wr = recv;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        // SAFETY: a PD and CQ of this context; the QP is owned by `self`.
        let qp = unsafe { ib::ibv_create_qp(self.pd, &mut init) };
        if qp.is_null() {
            return Err(errno(format!(
                "creating an RC queue pair ({send} sends, {recv} receives)"
            )));
        }
        self.qps.push(qp);
        // SAFETY: a created QP.
        Ok((self.qps.len() - 1, unsafe { (*qp).qp_num }))
    }

    /// Moves queue pair `qp` through `t`.
    pub(crate) fn modify(&mut self, qp: usize, t: &Transition) -> Result<(), VerbsError> {
        let (mut attr, mask) = attributes(t);
        // SAFETY: a QP of this stack and a filled attribute struct.
        let rc = unsafe { ib::ibv_modify_qp(self.qps[qp], &mut attr, mask as i32) };
        if rc != 0 {
            return Err(code(format!("queue pair transition {t:?}"), rc));
        }
        Ok(())
    }

    /// Posts a chain of writes on queue pair `qp`, in order.
    ///
    /// # Safety
    /// Each `local` range lies in the registered region and is not changed until the chain's
    /// signaled completion; the remote ranges are the peer's to check (its rkey bounds them).
    pub(crate) unsafe fn write(&mut self, qp: usize, chain: &[Write]) -> Result<(), VerbsError> {
        let lkey = self.lkey();
        let mut sges: Vec<ib::ibv_sge> = chain
            .iter()
            .map(|w| ib::ibv_sge {
                addr: w.local as u64,
                length: w.len,
                lkey,
            })
            .collect();
        // SAFETY: plain C data, zero is "unset"; filled below.
        let mut wrs: Vec<ib::ibv_send_wr> = chain
            .iter()
            .map(|_| unsafe { std::mem::zeroed() })
            .collect();
        let n = wrs.len();
        for (i, w) in chain.iter().enumerate() {
            let next: *mut ib::ibv_send_wr = if i + 1 < n {
                &mut wrs[i + 1]
            } else {
                ptr::null_mut()
            };
            let wr = &mut wrs[i];
            wr.wr_id = w.wr_id;
            wr.next = next;
            wr.sg_list = &mut sges[i];
            wr.num_sge = 1;
            wr.opcode = match w.imm {
                Some(imm) => {
                    wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
                    ib::ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM
                }
                None => ib::ibv_wr_opcode::IBV_WR_RDMA_WRITE,
            };
            if w.signaled {
                wr.send_flags = ib::ibv_send_flags::IBV_SEND_SIGNALED.0;
            }
            wr.wr.rdma.remote_addr = w.remote;
            wr.wr.rdma.rkey = w.rkey;
        }
        let mut bad: *mut ib::ibv_send_wr = ptr::null_mut();
        // SAFETY: a chain of valid work requests whose buffers the caller vouches for; verbs
        // copies the requests before returning.
        let rc = unsafe { ib::ibv_post_send(self.qps[qp], wrs.as_mut_ptr(), &mut bad) };
        if rc != 0 {
            return Err(code("posting RDMA writes", rc));
        }
        Ok(())
    }

    /// Posts `n` receives without buffers (each takes one arriving write with immediate) on
    /// queue pair `qp`, all with `wr_id`.
    pub(crate) fn post_recvs(&mut self, qp: usize, n: u32, wr_id: u64) -> Result<(), VerbsError> {
        for _ in 0..n {
            let mut wr = ib::ibv_recv_wr {
                wr_id,
                next: ptr::null_mut(),
                sg_list: ptr::null_mut(),
                num_sge: 0,
            };
            let mut bad: *mut ib::ibv_recv_wr = ptr::null_mut();
            // SAFETY: a QP of this stack; a receive without scatter entries touches no memory.
            let rc = unsafe { ib::ibv_post_recv(self.qps[qp], &mut wr, &mut bad) };
            if rc != 0 {
                return Err(code("posting a receive", rc));
            }
        }
        Ok(())
    }

    /// Polls up to 32 completions into `out` (cleared first); their number.
    pub(crate) fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize, VerbsError> {
        out.clear();
        // SAFETY: ibv_wc is plain C data; the CQ writes at most 32 entries into the array.
        let mut wc: [ib::ibv_wc; 32] = unsafe { std::mem::zeroed() };
        // SAFETY: the CQ of this stack and room for 32 entries.
        let n = unsafe { ib::ibv_poll_cq(self.cq, 32, wc.as_mut_ptr()) };
        if n < 0 {
            return Err(code("polling the completion queue", n));
        }
        for w in &wc[..n as usize] {
            let ok = w.status == ib::ibv_wc_status::IBV_WC_SUCCESS;
            let with_imm = ok && w.opcode == ib::ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM;
            out.push(Completion {
                wr_id: w.wr_id,
                qp_num: w.qp_num,
                failed: (!ok).then(|| status_str(w.status)),
                // SAFETY: the union holds the immediate for this opcode.
                imm: with_imm
                    .then(|| u32::from_be(unsafe { w.imm_data_invalidated_rkey_union.imm_data })),
                flushed: w.status == ib::ibv_wc_status::IBV_WC_WR_FLUSH_ERR,
            });
        }
        Ok(n as usize)
    }

    /// Asks for the next completion to make the channel readable.
    pub(crate) fn arm(&mut self) -> Result<(), VerbsError> {
        // SAFETY: the CQ of this stack.
        let rc = unsafe { ib::ibv_req_notify_cq(self.cq, 0) };
        if rc != 0 {
            return Err(code("arming the completion queue", rc));
        }
        Ok(())
    }

    /// Takes the channel's pending event, if any (the channel is non-blocking), and acknowledges
    /// it in batches (every event must be acknowledged before the CQ is destroyed).
    pub(crate) fn take_event(&mut self) -> bool {
        let mut cq: *mut ib::ibv_cq = ptr::null_mut();
        let mut ctx: *mut std::os::raw::c_void = ptr::null_mut();
        // SAFETY: the channel of this stack; a non-blocking read that fails with EAGAIN when
        // no event is pending.
        if unsafe { ib::ibv_get_cq_event(self.channel, &mut cq, &mut ctx) } != 0 {
            return false;
        }
        self.unacked += 1;
        if self.unacked >= 64 {
            // SAFETY: acknowledging events taken from this CQ.
            unsafe { ib::ibv_ack_cq_events(self.cq, self.unacked) };
            self.unacked = 0;
        }
        true
    }

    fn lkey(&self) -> u32 {
        assert!(!self.mr.is_null(), "write before the region was registered");
        // SAFETY: a registered MR.
        unsafe { (*self.mr).lkey }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: every object was made by this stack, is destroyed once, children before
        // parents; pending CQ events are acknowledged first, as destroying the CQ requires.
        unsafe {
            for &qp in &self.qps {
                ib::ibv_destroy_qp(qp);
            }
            if !self.mr.is_null() {
                ib::ibv_dereg_mr(self.mr);
            }
            if !self.cq.is_null() {
                if self.unacked > 0 {
                    ib::ibv_ack_cq_events(self.cq, self.unacked);
                }
                ib::ibv_destroy_cq(self.cq);
            }
            if !self.channel.is_null() {
                ib::ibv_destroy_comp_channel(self.channel);
            }
            if !self.pd.is_null() {
                ib::ibv_dealloc_pd(self.pd);
            }
            ib::ibv_close_device(self.ctx);
        }
    }
}

/// The first active port of an open device, with its GID `gid_index` and the device's limits.
fn active_port(
    ctx: *mut ib::ibv_context,
    name: &str,
    gid_index: u8,
) -> Result<Option<Port>, VerbsError> {
    // SAFETY: plain C data written by the query.
    let mut dev: ib::ibv_device_attr = unsafe { std::mem::zeroed() };
    // SAFETY: an open context and a struct to fill.
    let rc = unsafe { ib::ibv_query_device(ctx, &mut dev) };
    if rc != 0 {
        return Err(code(format!("querying device {name}"), rc));
    }
    for num in 1..=dev.phys_port_cnt {
        // SAFETY: plain C data written by the query.
        let mut pa: ib::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: an open context, a port number the device has, a struct to fill.
        let rc = unsafe { ib::___ibv_query_port(ctx, num, &mut pa) };
        if rc != 0 {
            return Err(code(format!("querying port {num} of {name}"), rc));
        }
        if pa.state != PORT_ACTIVE {
            continue;
        }
        // SAFETY: plain C data written by the query.
        let mut gid: ib::ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: an open context, an existing port, a GID to fill.
        let rc = unsafe { ib::ibv_query_gid(ctx, num, i32::from(gid_index), &mut gid) };
        if rc != 0 {
            return Err(code(
                format!("reading GID {gid_index} of {name} port {num}"),
                rc,
            ));
        }
        return Ok(Some(Port {
            device: name.to_string(),
            num,
            lid: pa.lid,
            link_layer: pa.link_layer,
            active_mtu: pa.active_mtu,
            // SAFETY: every bit pattern of the union is a valid byte array.
            gid: unsafe { gid.raw },
            gid_index,
            max_qp_wr: dev.max_qp_wr.max(0) as u32,
            max_cqe: dev.max_cqe.max(0) as u32,
        }));
    }
    Ok(None)
}

/// Makes `fd` non-blocking (the completion channel: the progress thread waits in epoll).
fn set_nonblocking(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    let flags = rustix::fs::fcntl_getfl(fd)?;
    rustix::fs::fcntl_setfl(fd, flags | rustix::fs::OFlags::NONBLOCK)?;
    Ok(())
}

fn status_str(status: ib::ibv_wc_status::Type) -> &'static str {
    // SAFETY: rdma-core returns a static NUL-terminated string for every status value.
    let s = unsafe { ib::ibv_wc_status_str(status) };
    if s.is_null() {
        return "unknown status";
    }
    // SAFETY: as above; the string is static.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .unwrap_or("unknown status")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The masks verbs requires for each RC transition (ibv_modify_qp(3)), and the values set.
    #[test]
    fn each_transition_sets_exactly_the_attributes_verbs_requires() {
        use ib::ibv_qp_attr_mask as m;
        let (a, mask) = attributes(&Transition::Init { port: 1 });
        let want = m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_ACCESS_FLAGS;
        assert_eq!(mask, want.0);
        assert_eq!(
            (a.qp_state, a.port_num),
            (ib::ibv_qp_state::IBV_QPS_INIT, 1)
        );
        assert_eq!(
            a.qp_access_flags & ib::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0,
            ib::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
        );
        let rtr = Transition::Rtr {
            port: 2,
            path_mtu: 3,
            dest_qpn: 0x1234,
            rq_psn: 77,
            dlid: 9,
            global: Some(([1; 16], 3)),
        };
        let (a, mask) = attributes(&rtr);
        for bit in [
            m::IBV_QP_AV,
            m::IBV_QP_DEST_QPN,
            m::IBV_QP_RQ_PSN,
            m::IBV_QP_PATH_MTU,
        ] {
            assert_ne!(mask & bit.0, 0, "{bit:?}");
        }
        assert_eq!(mask & m::IBV_QP_SQ_PSN.0, 0);
        assert_eq!((a.dest_qp_num, a.rq_psn, a.path_mtu), (0x1234, 77, 3));
        assert_eq!(
            (a.ah_attr.dlid, a.ah_attr.port_num, a.ah_attr.is_global),
            (9, 2, 1)
        );
        // SAFETY: reading the byte-array view of a union set as bytes.
        assert_eq!(unsafe { a.ah_attr.grh.dgid.raw }, [1; 16]);
        assert_eq!(a.ah_attr.grh.sgid_index, 3);
        let (a, mask) = attributes(&Transition::Rts { sq_psn: 5 });
        assert_ne!(mask & m::IBV_QP_SQ_PSN.0, 0);
        assert_eq!(mask & m::IBV_QP_AV.0, 0);
        assert_eq!((a.sq_psn, a.retry_cnt, a.rnr_retry), (5, 7, 7));
    }

    /// This machine has no RDMA device: the open says so, as the start-up error will.
    #[test]
    fn open_without_a_device_says_none_was_found() {
        if !devices().is_empty() {
            return; // a machine with RDMA hardware
        }
        assert_eq!(Stack::open(None, 0).err(), Some(OpenError::NoDevice));
        assert_eq!(
            Stack::open(Some("mlx5_0"), 0).err(),
            Some(OpenError::NoDevice)
        );
    }
}
