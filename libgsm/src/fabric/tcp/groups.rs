//! Who reads what: the groups of ranks that share connections (a host's ranks, or each rank
//! alone), which worker of a remote group a worker's connection goes to, which connections are
//! two-way, and who opens them. Pure arithmetic on the topology that every rank computes alike,
//! so a hello only confirms it; it makes no ring or socket. See the `tcp` module docs ("One
//! connection per (worker, remote host)") and `fabric/tcp/README.md`.

use crate::fabric::Topology;

/// Not on this group.
pub(super) const NONE: u32 = u32::MAX;

/// How the job's ranks group (see the module docs).
#[derive(Debug, Clone)]
pub(in crate::fabric::tcp) struct Groups {
    /// This rank.
    pub(in crate::fabric::tcp) me: u32,
    /// Whether a group is a host's ranks (else each rank is its own group).
    pub(in crate::fabric::tcp) per_host: bool,
    /// Group of each rank.
    group: Vec<u32>,
    /// Each group's workers (global ids), rank by rank.
    members: Vec<Vec<u32>>,
    /// Each global worker's index in its group.
    index: Vec<u32>,
    /// Each global worker's rank.
    rank_of: Vec<u32>,
    /// Each rank's first global worker.
    first: Vec<u32>,
    /// Whether each group holds a tcp peer of this rank.
    peer: Vec<bool>,
}

/// Whether `GSM_TCP_PER_HOST` allows per-host connections (unless it is off).
pub(super) fn per_host_wanted() -> bool {
    gsm_contract::value(&gsm_contract::table::TCP_PER_HOST)
}

impl Groups {
    /// The groups of `topo`: hosts when `want` and no other rank of this host is a tcp peer
    /// (`is_peer`: with `--fabric tcp` on one host, the ranks of a host reach each other by tcp
    /// and have no shm segment to lend their rings through), else ranks. The second value says
    /// why per-host was not taken, when it was wanted.
    pub(in crate::fabric::tcp) fn new(
        topo: &Topology,
        is_peer: &[bool],
        want: bool,
    ) -> (Groups, Option<&'static str>) {
        let me = topo.rank;
        let ranks = topo.ranks() as usize;
        let host = |r: usize| topo.hosts.get(r).map(String::as_str).unwrap_or("");
        let tcp_here =
            (0..ranks).any(|r| r != me as usize && host(r) == host(me as usize) && is_peer[r]);
        let per_host = want && !tcp_here;
        let why = match (want, tcp_here) {
            (true, true) => Some("ranks of this host are tcp peers of each other (--fabric tcp)"),
            _ => None,
        };
        let mut group = Vec::with_capacity(ranks);
        let mut names: Vec<&str> = Vec::new();
        for r in 0..ranks {
            let id = if per_host {
                match names.iter().position(|&n| n == host(r)) {
                    Some(i) => i,
                    None => {
                        names.push(host(r));
                        names.len() - 1
                    }
                }
            } else {
                r
            };
            group.push(id as u32);
        }
        let ngroups = group.iter().copied().max().map_or(0, |m| m as usize + 1);
        let mut members = vec![Vec::new(); ngroups];
        let (mut index, mut rank_of, mut first) = (Vec::new(), Vec::new(), Vec::new());
        let mut g = 0u32;
        for (r, &n) in topo.workers.iter().enumerate() {
            first.push(g);
            for _ in 0..n {
                let m = &mut members[group[r] as usize];
                index.push(m.len() as u32);
                m.push(g);
                rank_of.push(r as u32);
                g += 1;
            }
        }
        let mut peer = vec![false; ngroups];
        for (r, &p) in is_peer.iter().enumerate() {
            if p && r < ranks {
                peer[group[r] as usize] = true;
            }
        }
        let groups = Groups {
            peer,
            me,
            per_host,
            group,
            members,
            index,
            rank_of,
            first,
        };
        (groups, why)
    }

    /// This rank's group.
    pub(in crate::fabric::tcp) fn mine(&self) -> u32 {
        self.group[self.me as usize]
    }

    /// The group of rank `r`.
    pub(in crate::fabric::tcp) fn of_rank(&self, r: u32) -> u32 {
        self.group[r as usize]
    }

    /// The workers of group `h`, rank by rank.
    pub(in crate::fabric::tcp) fn members(&self, h: u32) -> &[u32] {
        &self.members[h as usize]
    }

    /// The ranks of group `h`, ascending.
    pub(in crate::fabric::tcp) fn ranks_of(&self, h: u32) -> Vec<u32> {
        (0..self.group.len() as u32)
            .filter(|&r| self.group[r as usize] == h)
            .collect()
    }

    /// The groups of this rank's tcp peers, ascending.
    pub(in crate::fabric::tcp) fn remote(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.members.len() as u32)
            .filter(|&h| h != self.mine() && self.peer[h as usize] && !self.members(h).is_empty())
    }

    /// Workers in the job.
    pub(in crate::fabric::tcp) fn total(&self) -> usize {
        self.index.len()
    }

    /// The rank of global worker `g`.
    pub(in crate::fabric::tcp) fn rank(&self, g: u32) -> u32 {
        self.rank_of[g as usize]
    }

    /// Global worker `g`'s index within its rank.
    pub(in crate::fabric::tcp) fn local(&self, g: u32) -> u32 {
        g - self.first[self.rank(g) as usize]
    }

    /// Global worker `g`'s index within its group, or [`NONE`] for a worker not in the job.
    pub(in crate::fabric::tcp) fn index(&self, g: u32) -> u32 {
        self.index.get(g as usize).copied().unwrap_or(NONE)
    }

    /// The global id of this rank's worker `l`.
    pub(in crate::fabric::tcp) fn global(&self, l: u32) -> u32 {
        self.first[self.me as usize] + l
    }

    /// The worker of group `to` that worker `g`'s connection to that group reaches (its rank
    /// reads what `g` sends to any worker of `to`): the one with `g`'s index in its group,
    /// modulo `to`'s workers, so that the reading spreads over `to`'s ranks.
    pub(in crate::fabric::tcp) fn target(&self, g: u32, to: u32) -> u32 {
        let m = self.members(to);
        m[self.index(g) as usize % m.len()]
    }

    /// The worker of group `to` that writes back on worker `g`'s connection to it, when that
    /// connection is two-way: worker `i` of a group pairs with worker `i` of the other, and the
    /// one of the lower rank connects. `None`: a one-way connection (`g` has no partner there,
    /// or `two_way` is off), or `g` does not connect (its partner does).
    pub(in crate::fabric::tcp) fn partner(&self, g: u32, to: u32, two_way: bool) -> Option<u32> {
        let i = self.index(g) as usize;
        let t = *self.members(to).get(i)?;
        (two_way && self.rank(g) < self.rank(t)).then_some(t)
    }

    /// Whether worker `g` opens a connection to group `to`: unless its frames ride back on its
    /// partner's two-way connection.
    pub(in crate::fabric::tcp) fn connects(&self, g: u32, to: u32, two_way: bool) -> bool {
        let t = self.target(g, to);
        self.partner(t, self.group[self.rank(g) as usize], two_way) != Some(g)
    }

    /// The rank of this rank's group that reads the frames remote worker `g` sends here.
    pub(in crate::fabric::tcp) fn reader(&self, g: u32) -> u32 {
        self.rank(self.target(g, self.mine()))
    }
}
