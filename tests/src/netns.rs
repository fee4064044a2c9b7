//! Two simulated hosts on one machine: network namespaces joined by a bridge.
//!
//! [`TwoHosts::start`] makes a bridge in the root namespace holding `10.77.X.1/24`, and two
//! namespaces holding `10.77.X.11` and `10.77.X.12`, each joined to the bridge by a veth pair. The
//! subnet `X` is chosen per run among those no interface here uses. Names carry the test process's
//! pid and a counter, so concurrent runs never collide and a later run can recognise what a killed
//! run left behind and remove it first:
//!
//! - namespaces `gsmt-<pid>-<n>-h1` / `-h2` (the same string is the host name inside, see below);
//! - bridge `gsmt<pidhex>x<n>b`, veths `gsmt<pidhex>x<n>1` / `2` (interface names are at most 15
//!   bytes: 4 + 6 + 1 + up to 3 + 1).
//!
//! Host names: a namespace has no UTS namespace of its own; the launch agent
//! `tests/testbed/nsagent HOST CMD…` (the `ssh` stand-in handed to Open MPI) enters the network
//! namespace that owns HOST's address, and a fresh UTS namespace named after it. Processes started
//! that way report the namespace's name as their host name.
//!
//! Everything is removed on drop, even when the test panics: processes still inside the namespaces
//! are killed, the namespaces and the veths deleted, the bridge deleted. This module does not
//! start any daemon and does not route anything off the machine.

use crate::error::{TestbedError, command};
use crate::scratch::{RunId, owner_gone};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

/// Prefix of every name this module creates.
const PREFIX: &str = "gsmt";

/// One simulated host.
#[derive(Debug, Clone)]
pub struct NsHost {
    /// The network namespace (`/run/netns/<netns>`).
    pub netns: String,
    /// The host name processes started through the agent see.
    pub hostname: String,
    /// Its IPv4 address on the bridge.
    pub addr: String,
}

/// Two hosts in network namespaces on a private bridge.
#[derive(Debug)]
pub struct TwoHosts {
    /// The two hosts, `h1` then `h2`.
    pub hosts: [NsHost; 2],
    subnet: u8,
    bridge: String,
    created_netns: Vec<String>,
    /// The bridge-side ends of the veth pairs.
    created_veths: Vec<String>,
    created_bridge: bool,
}

fn netns_name(id: RunId, i: u32) -> String {
    format!("{PREFIX}-{}-{}-h{i}", id.pid, id.n)
}

fn link_base(id: RunId) -> String {
    format!("{PREFIX}{:x}x{}", id.pid, id.n)
}

/// Removes namespaces and interfaces left by test processes that are gone.
pub fn remove_leftovers() {
    if let Ok(list) = command("ip", &["netns", "list"]) {
        for name in list
            .lines()
            .filter_map(|line| line.split_whitespace().next())
        {
            let Some(rest) = name.strip_prefix(PREFIX).and_then(|r| r.strip_prefix('-')) else {
                continue;
            };
            let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            if owner_gone(pid) {
                delete_netns(name);
            }
        }
    }
    if let Ok(links) = command("ip", &["-o", "link", "show"]) {
        for line in links.lines() {
            // `7: gsmt1a2bx0b: <…>` or `8: gsmt1a2bx01@if2: <…>`
            let Some(name) = line
                .split(": ")
                .nth(1)
                .map(|n| n.split('@').next().unwrap_or(n))
            else {
                continue;
            };
            let Some(rest) = name.strip_prefix(PREFIX) else {
                continue;
            };
            let Some(pid) = rest
                .split('x')
                .next()
                .and_then(|p| u32::from_str_radix(p, 16).ok())
            else {
                continue;
            };
            if owner_gone(pid) {
                let _ = command("ip", &["link", "del", name]);
            }
        }
    }
}

fn delete_netns(name: &str) {
    if let Ok(pids) = command("ip", &["netns", "pids", name]) {
        for pid in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            // These processes live in a namespace this test bed created and is deleting.
            crate::sys::kill(pid, crate::sys::SIGKILL);
        }
    }
    let _ = command("ip", &["netns", "del", name]);
}

fn used_subnets() -> Vec<u8> {
    let addrs = command("ip", &["-o", "-4", "addr", "show"]).unwrap_or_default();
    addrs
        .split_whitespace()
        .filter_map(|word| word.strip_prefix("10.77."))
        .filter_map(|rest| rest.split('.').next()?.parse().ok())
        .collect()
}

impl TwoHosts {
    /// Builds the two hosts (removing leftovers of killed runs first).
    pub fn start() -> Result<Self, TestbedError> {
        crate::error::require("ip", "network namespaces for the two-host tests")?;
        crate::error::require("nsenter", "the launch agent enters namespaces")?;
        crate::error::require("unshare", "the launch agent gives each host its own name")?;
        remove_leftovers();
        let id = RunId::next();
        let used = used_subnets();
        let start = (id.pid.wrapping_mul(7).wrapping_add(id.n * 13) % 254) as u8;
        let subnet = (0..254u8)
            .map(|k| (start.wrapping_add(k) % 254) + 1)
            .find(|x| !used.contains(x))
            .ok_or_else(|| TestbedError::Command {
                command: "choosing a subnet".into(),
                detail: "every 10.77.X.0/24 is in use".into(),
            })?;
        let base = link_base(id);
        let hosts = [1u32, 2].map(|i| NsHost {
            netns: netns_name(id, i),
            hostname: netns_name(id, i),
            addr: format!("10.77.{subnet}.1{i}"),
        });
        let mut bed = Self {
            hosts,
            subnet,
            bridge: format!("{base}b"),
            created_netns: Vec::new(),
            created_veths: Vec::new(),
            created_bridge: false,
        };
        let bridge = bed.bridge.clone();
        command("ip", &["link", "add", &bridge, "type", "bridge"])?;
        bed.created_bridge = true;
        command(
            "ip",
            &[
                "addr",
                "add",
                &format!("10.77.{subnet}.1/24"),
                "dev",
                &bridge,
            ],
        )?;
        command("ip", &["link", "set", &bridge, "up"])?;
        for (i, host) in bed.hosts.clone().iter().enumerate() {
            let ns = &host.netns;
            let veth = format!("{base}{}", i + 1);
            command("ip", &["netns", "add", ns])?;
            bed.created_netns.push(ns.clone());
            command(
                "ip",
                &[
                    "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", ns,
                ],
            )?;
            bed.created_veths.push(veth.clone());
            command("ip", &["link", "set", &veth, "master", &bridge])?;
            command("ip", &["link", "set", &veth, "up"])?;
            command(
                "ip",
                &[
                    "-n",
                    ns,
                    "addr",
                    "add",
                    &format!("{}/24", host.addr),
                    "dev",
                    "eth0",
                ],
            )?;
            command("ip", &["-n", ns, "link", "set", "eth0", "up"])?;
            command("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(bed)
    }

    /// A test bed shared by the tests of one process that run at the same time; it is torn down
    /// when the last of them drops its handle.
    pub fn shared() -> Arc<Self> {
        static SHARED: Mutex<Weak<TwoHosts>> = Mutex::new(Weak::new());
        let mut slot = SHARED.lock().unwrap_or_else(|poison| poison.into_inner());
        if let Some(bed) = slot.upgrade() {
            return bed;
        }
        let bed = Arc::new(Self::start().unwrap_or_else(|err| panic!("{err}")));
        *slot = Arc::downgrade(&bed);
        bed
    }

    /// The subnet, as `10.77.X.0/24`.
    pub fn subnet(&self) -> String {
        format!("10.77.{}.0/24", self.subnet)
    }

    /// The environment Open MPI needs to keep its traffic on the bridge.
    pub fn mpi_env(&self) -> Vec<(String, String)> {
        vec![
            ("OMPI_MCA_oob_tcp_if_include".into(), self.subnet()),
            ("OMPI_MCA_btl_tcp_if_include".into(), self.subnet()),
        ]
    }

    /// A hostfile naming both hosts by address, `slots` each.
    pub fn hostfile(&self, slots: u32) -> String {
        self.hosts
            .iter()
            .map(|host| format!("{} slots={slots}\n", host.addr))
            .collect()
    }

    /// The launch agent (`ssh` stand-in) that enters these namespaces.
    pub fn agent() -> PathBuf {
        crate::bins::testbed_script("nsagent")
    }

    /// Pulls host `i`'s cable: its interface goes down, so nothing leaves it or reaches it, and
    /// the other host hears nothing at all from it (no FIN, no RST, no ICMP from it); its sockets
    /// stay as they are. Undo with [`TwoHosts::plug`].
    pub fn unplug(&self, i: usize) -> Result<(), TestbedError> {
        command(
            "ip",
            &["-n", &self.hosts[i].netns, "link", "set", "eth0", "down"],
        )
        .map(drop)
    }

    /// Plugs host `i`'s cable back in: its interface comes up with its address and route, as
    /// [`TwoHosts::start`] made them.
    pub fn plug(&self, i: usize) -> Result<(), TestbedError> {
        let ns = &self.hosts[i].netns;
        command("ip", &["-n", ns, "link", "set", "eth0", "up"])?;
        let link = command("ip", &["-n", ns, "-o", "link", "show", "eth0"])?;
        let addr = command("ip", &["-n", ns, "-o", "-4", "addr", "show", "dev", "eth0"])?;
        let wanted = format!(" inet {}/24 ", self.hosts[i].addr);
        if link.contains(",UP") && addr.contains(&wanted) {
            Ok(())
        } else {
            Err(TestbedError::Command {
                command: format!("ip -n {ns} link set eth0 up"),
                detail: format!("eth0 is not up with {}: {link} {addr}", self.hosts[i].addr),
            })
        }
    }
}

impl NsHost {
    /// The processes running in this host's network namespace.
    pub fn pids(&self) -> Vec<u32> {
        command("ip", &["netns", "pids", &self.netns])
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// Whether process `pid` runs in this host's network namespace.
    pub fn holds(&self, pid: u32) -> bool {
        use std::os::unix::fs::MetadataExt;
        let mine = std::fs::metadata(format!("/run/netns/{}", self.netns));
        let its = std::fs::metadata(format!("/proc/{pid}/ns/net"));
        match (mine, its) {
            (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
            _ => false,
        }
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        for ns in &self.created_netns {
            delete_netns(ns);
        }
        // Deleting a namespace deletes its veths only once the kernel frees it, which sockets
        // still retransmitting (to a host that was unplugged, say) delay by minutes. Deleting
        // the bridge's end deletes both ends at once.
        for veth in &self.created_veths {
            if command("ip", &["link", "show", veth]).is_ok() {
                let _ = command("ip", &["link", "del", veth]);
            }
        }
        if self.created_bridge {
            let _ = command("ip", &["link", "del", &self.bridge]);
        }
    }
}
