//! The launch contract: what `gsmrun` (and its rank wrapper) and the runtime must say alike. The
//! stage bytes a rank reports on its `GSM_STATE_FD` socket, the file names of a job's
//! shared-memory segments, and the fabrics ([`FabricKind`], [`FabricChoice`]: `GSM_FABRIC`,
//! `gsmrun --fabric`, the runtime's registry). The variables themselves are settings of
//! [`crate::table`]'s launch section.
//!
//! The fabrics are one list, the `fabrics!` lines below: a new fabric is one line there (with
//! its folder and its registry line in the runtime, `libgsm/src/fabric/README.md`), and
//! `GSM_FABRIC`'s words, `gsmrun --fabric`'s values and help, and the reference page follow.
//!
//! Both sides link this module, so they cannot drift apart; it holds no I/O.

/// Most worker threads one rank may run: the runtime refuses more, and `gsmrun -t` too.
pub const MAX_WORKERS: u64 = 4096;

/// A stage of a rank's job, sent as one byte to its rank wrapper (which forwards it to
/// `gsmrun`) as the rank enters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    /// About to initialise MPI and wait for every rank in the bootstrap exchange.
    Joining = b'J',
    /// About to start one collective `run`/`spmd` (its first exchange).
    Run = b'R',
    /// About to finalise MPI at the end of the job: the rank starts no more runs.
    Leaving = b'L',
    /// MPI given up after a failure (never finalised): the rank has failed, even if the process
    /// then exits 0.
    Abandoned = b'A',
    /// The job was found deadlocked: every rank found it in the same wave and fails its run with
    /// its own report.
    Deadlocked = b'D',
    /// The rank's run failed because another rank's did (it vanished, or told its failure).
    Follows = b'F',
}

impl Stage {
    /// Every stage.
    pub const ALL: [Stage; 6] = [
        Stage::Joining,
        Stage::Run,
        Stage::Leaving,
        Stage::Abandoned,
        Stage::Deadlocked,
        Stage::Follows,
    ];

    /// The byte sent for this stage.
    pub const fn byte(self) -> u8 {
        self as u8
    }

    /// The stage a byte names, `None` for a byte that names none.
    pub fn from_byte(b: u8) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.byte() == b)
    }
}

/// The file name of rank `rank`'s `shm` segment in job `job_id` (under `/dev/shm`). The runtime
/// unlinks it once every rank has attached; after a crash the wrapper and `gsmrun` remove it.
pub fn segment_name(job_id: &str, rank: u32) -> String {
    format!("{job_id}-r{rank}")
}

/// The suffix of the `tcp` fabric's segment of a rank (per-host connections), after
/// [`segment_name`].
pub const TCP_SEGMENT_SUFFIX: &str = "-tcp";

/// The file name of rank `rank`'s `tcp` fabric segment in job `job_id`.
pub fn tcp_segment_name(job_id: &str, rank: u32) -> String {
    format!("{}{TCP_SEGMENT_SUFFIX}", segment_name(job_id, rank))
}

/// Whether a job id can name segments at all: a non-empty file-name component. An empty or odd
/// id matches nothing, so nothing is removed for it.
pub fn usable_job_id(job_id: &str) -> bool {
    !job_id.is_empty() && !job_id.contains('/') && !job_id.contains('\0') && job_id != "."
}

/// Whether `file_name` is a segment of job `job_id`: exactly [`segment_name`] of a rank number
/// (ASCII digits only), optionally followed by [`TCP_SEGMENT_SUFFIX`]. `gsm-1-ab-r0` is a
/// segment of `gsm-1-ab`, `gsm-1-abc-r0` is not.
pub fn is_job_segment(file_name: &str, job_id: &str) -> bool {
    if !usable_job_id(job_id) {
        return false;
    }
    let Some(rest) = file_name
        .strip_prefix(job_id)
        .and_then(|r| r.strip_prefix("-r"))
    else {
        return false;
    };
    let rest = rest.strip_suffix(TCP_SEGMENT_SUFFIX).unwrap_or(rest);
    !rest.is_empty() && rest.len() <= 10 && rest.bytes().all(|b| b.is_ascii_digit())
}

/// Declares the fabrics, one line each (with its doc comment): the kind, its name (`GSM_FABRIC`,
/// `gsmrun --fabric`, the runtime's registry and log, a rank's offer), other words that name it
/// (`| "word"`), how a build of the runtime gets it ([`Build`]), and one line saying what it
/// carries ring bytes over (`gsmrun --help`, `--dry-run`, docs/settings.md).
macro_rules! fabrics {
    ($(
        $(#[doc = $doc:literal])*
        $kind:ident = $name:literal $(| $alias:literal)*, $build:expr, $over:literal;
    )*) => {
        /// A fabric of the runtime, as every side names it (see [`FabricChoice`] for the
        /// choice among them). Written by one line of the `fabrics!` list in
        /// `contract/src/contract.rs`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum FabricKind {
            $($(#[doc = $doc])* $kind,)*
        }

        impl FabricKind {
            /// Every fabric, in the order of the list.
            pub const ALL: &'static [FabricKind] = &[$(FabricKind::$kind),*];

            /// Its name: the value of `GSM_FABRIC` that chooses it for every peer.
            pub const fn name(self) -> &'static str {
                match self {
                    $(FabricKind::$kind => $name,)*
                }
            }

            /// Other words that name it in `GSM_FABRIC`.
            pub const fn aliases(self) -> &'static [&'static str] {
                match self {
                    $(FabricKind::$kind => &[$($alias),*],)*
                }
            }

            /// How a build of the runtime gets it.
            pub const fn build(self) -> Build {
                match self {
                    $(FabricKind::$kind => $build,)*
                }
            }

            /// What it carries ring bytes over, in a few words.
            pub const fn over(self) -> &'static str {
                match self {
                    $(FabricKind::$kind => $over,)*
                }
            }
        }

        /// Every word `GSM_FABRIC` takes: `auto`, then each fabric's name and aliases.
        pub const FABRIC_WORDS: &[&str] = &["auto", $($name, $($alias,)*)*];
    };
}

fabrics! {
    /// Shared memory, for ranks on the same host.
    Shm = "shm", Build::Always, "shared memory; every rank on one host";
    /// TCP, for ranks on different hosts.
    Tcp = "tcp", Build::Always, "TCP connections";
    /// One-sided RMA over libfabric.
    Ofi = "ofi", Build::Feature {
        feature: "ofi",
        needs: "libfabric-dev",
        instead: "",
    }, "one-sided RMA over libfabric, provider GSM_OFI_PROVIDER";
    /// RDMA writes on RC queue pairs through rdma-core's verbs.
    Verbs = "verbs" | "rdma", Build::Feature {
        feature: "rdma",
        needs: "libibverbs-dev",
        instead: "on RDMA hardware use GSM_FABRIC=ofi with GSM_OFI_PROVIDER='verbs;ofi_rxm' (or \
                  efa, cxi, psm3)",
    }, "RC queue pairs on GSM_VERBS_DEVICE or the first active RDMA port";
}

/// How a build of the runtime gets a fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// Every build has it.
    Always,
    /// Only a build with this cargo feature of the `gossamer` crate, which needs this system
    /// package to build; `instead`: what to use where the feature is missing (may be empty).
    Feature {
        feature: &'static str,
        needs: &'static str,
        instead: &'static str,
    },
}

impl std::fmt::Display for FabricKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FabricKind {
    /// The fabric whose name is exactly `name` (as a rank's offer writes it), `None` for another.
    pub fn named(name: &str) -> Option<FabricKind> {
        FabricKind::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// Why a build without it refuses it, after `GSM_FABRIC=<value>: `; `None` for a fabric
    /// every build has. `takes`: the choices that build has, as [`FabricChoice::listed`] says
    /// them.
    pub fn not_built(self, takes: &str) -> Option<String> {
        let Build::Feature {
            feature,
            needs,
            instead,
        } = self.build()
        else {
            return None;
        };
        let instead = if instead.is_empty() {
            String::new()
        } else {
            format!("; {instead}")
        };
        Some(format!(
            "this build of Gossamer has no {} fabric (cargo feature `{feature}` of the gossamer \
             crate, which needs {needs}){instead}; this build takes {takes}",
            self.name()
        ))
    }
}

/// The user's choice of fabric (`GSM_FABRIC`, `gsmrun --fabric`): `auto`, or one fabric for
/// every peer, even within a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FabricChoice {
    /// `shm` between ranks on one host; between hosts `tcp`, or a fabric the runtime finds
    /// serves better there (`ofi` on RDMA hardware, in a build with it).
    #[default]
    Auto,
    /// This fabric for every peer.
    Only(FabricKind),
}

impl FabricChoice {
    /// What `auto` means, in a few words.
    pub const AUTO_OVER: &'static str = "shared memory within a host; between hosts TCP, or ofi on RDMA hardware in a build with it";

    /// Every choice: `auto`, then each fabric.
    pub fn all() -> impl Iterator<Item = FabricChoice> {
        std::iter::once(FabricChoice::Auto).chain(FabricKind::ALL.iter().map(|&k| Self::Only(k)))
    }

    /// The value of `GSM_FABRIC` that makes it.
    pub const fn name(self) -> &'static str {
        match self {
            FabricChoice::Auto => "auto",
            FabricChoice::Only(k) => k.name(),
        }
    }

    /// The choice `word` names (any case, surrounding blanks allowed; a fabric's aliases too,
    /// blank is `auto`), `None` for another word.
    pub fn parse(word: &str) -> Option<FabricChoice> {
        let w = word.trim().to_ascii_lowercase();
        if w.is_empty() || w == "auto" {
            return Some(FabricChoice::Auto);
        }
        FabricKind::ALL
            .iter()
            .find(|k| k.name() == w || k.aliases().contains(&w.as_str()))
            .map(|&k| FabricChoice::Only(k))
    }

    /// `choices` as a message lists them: "auto, shm, tcp or ofi".
    pub fn listed(choices: impl IntoIterator<Item = FabricChoice>) -> String {
        let names: Vec<&str> = choices.into_iter().map(|c| c.name()).collect();
        match names.split_last() {
            None => String::new(),
            Some((last, [])) => (*last).to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        }
    }
}
