//! Tests of the hosts grammar, hostlist expansion, errors with their exact line:column, the
//! scheduler variables, the example hostfiles, and a seeded mutation run through both parsers.

use super::*;
use std::path::{Path, PathBuf};

fn hf(text: &str) -> Vec<Host> {
    match parse_hostfile(Path::new("hosts"), text) {
        Ok(h) => h,
        Err(e) => panic!("unexpected error:\n{e}"),
    }
}

fn names_slots(h: &[Host]) -> Vec<(String, u32)> {
    h.iter().map(|h| (h.name.clone(), h.slots)).collect()
}

fn ns(list: &[(&str, u32)]) -> Vec<(String, u32)> {
    list.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

fn err(text: &str) -> HostsError {
    match parse_hostfile(Path::new("hosts"), text) {
        Ok(h) => panic!("expected an error for {text:?}, got {h:?}"),
        Err(e) => e,
    }
}

fn at(text: &str) -> (usize, usize) {
    let e = err(text);
    (e.line.unwrap_or(0), e.column.unwrap_or(0))
}

#[test]
fn openmpi_lines_and_aliases() {
    let h = hf(
        "a slots=2\nb count=3 max_slots=4\nc cpu=1 max-count=2\nd cpus=5\ne\nalice@f slots = 2\n",
    );
    assert_eq!(
        names_slots(&h),
        ns(&[("a", 2), ("b", 3), ("c", 1), ("d", 5), ("e", 1), ("f", 2)])
    );
    assert_eq!(h[1].max_slots, Some(4));
    assert_eq!(h[2].max_slots, Some(2));
    assert_eq!(h[5].user.as_deref(), Some("alice"));
    for k in MAX_KEYS {
        let h = hf(&format!("n slots=1 {k}=3"));
        assert_eq!(h[0].max_slots, Some(3), "{k}");
    }
    // max_slots alone sets slots (Open MPI's rule).
    assert_eq!(hf("n max_slots=3")[0].slots, 3);
    assert_eq!(hf("n username=bob")[0].user.as_deref(), Some("bob"));
}

#[test]
fn comments_blank_lines_crlf_bom() {
    let text = "\u{feff}# head\r\n\r\na slots=2 # tail\r\n// c++\r\n/* block\r\n still */ b\r\nc /* mid */ slots=3\r\n  \r\n";
    assert_eq!(names_slots(&hf(text)), ns(&[("a", 2), ("b", 1), ("c", 3)]));
}

#[test]
fn hydra_host_colon_n() {
    let h = hf("a:4\nb:2 user=me\n10.0.0.1:3\n");
    assert_eq!(names_slots(&h), ns(&[("a", 4), ("b", 2), ("10.0.0.1", 3)]));
    assert_eq!(h[1].user.as_deref(), Some("me"));
}

/// Open MPI refuses a node name with `:` and Hydra reads `::1:2` as host `1`, so an IPv6 address
/// is refused where it is written, and a `host:N` with hex-digit names and a field too many is
/// not taken for one.
#[test]
fn ipv6_hosts_are_refused_where_they_are_written() {
    for (text, col) in [
        ("a\nfe80::1 slots=2\n", 1),
        ("b\n  ::1\n", 3),
        ("c\nu@::1:2\n", 3),
    ] {
        let e = err(text);
        assert_eq!((e.line, e.column), (Some(2), Some(col)), "{e}");
        assert!(
            e.report
                .contains("is an IPv6 address, and the MPI launchers cannot start ranks at one")
                && e.report.contains("help: name the host instead"),
            "{e}"
        );
    }
    let e = parse_host_option("a:2:3").unwrap_err();
    assert!(
        e.report
            .starts_with("-H/--host:1:1: `a:2:3` is neither `host:N` nor an IPv6 address")
            && e.report.contains("^^^^^")
            && e.report.contains("help: write `host:N`, with one `:`"),
        "{e}"
    );
    let e = parse_host_option("node1,::1").unwrap_err();
    assert_eq!((e.line, e.column), (Some(1), Some(7)), "{e}");
}

#[test]
fn host_on_several_lines_adds_up() {
    let h = hf("a slots=2\nb\na slots=3\nb:2\n");
    assert_eq!(names_slots(&h), ns(&[("a", 5), ("b", 3)]));
    let h = hf("a slots=1 max_slots=2\na slots=1 max_slots=3\n");
    assert_eq!(h[0].max_slots, Some(5));
    let h = hf("a slots=1 max_slots=2\na\n");
    assert_eq!(h[0].max_slots, None);
}

#[test]
fn names_differing_only_in_case_are_one_host() {
    // Host names are case-insensitive; passed on as two hosts, `Localhost slots=1` and
    // `localhost slots=1` made Open MPI fail ("multiple definitions of the slot count").
    let h = hf("Localhost slots=1\nlocalhost slots=1\nNODE[1-2]\nnode1:2\n");
    assert_eq!(
        names_slots(&h),
        ns(&[("Localhost", 2), ("NODE1", 3), ("NODE2", 1)])
    );
    let h = parse_host_option("Localhost:1,localhost:1").unwrap();
    assert_eq!(names_slots(&h), ns(&[("Localhost", 2)]));
    // Different names of one machine are not resolved, so not merged.
    let h = hf("127.0.0.1\nlocalhost\n");
    assert_eq!(names_slots(&h), ns(&[("127.0.0.1", 1), ("localhost", 1)]));
    // A user conflict names the spelling of the first line.
    let e = err("u@Node\nv@node\n");
    assert!(e.report.contains("on line 1 (as `Node`)"), "{e}");
}

#[test]
fn hostlist_expansion_follows_slurm() {
    let names = |t: &str| hf(t).into_iter().map(|h| h.name).collect::<Vec<_>>();
    assert_eq!(names("n[08-11]"), ["n08", "n09", "n10", "n11"]);
    assert_eq!(names("n[008-11]"), ["n008", "n009", "n010", "n011"]);
    assert_eq!(names("n[099-101]"), ["n099", "n100", "n101"]);
    assert_eq!(names("n[8-011]"), ["n8", "n9", "n10", "n11"]);
    assert_eq!(
        names("rack[1-2]-n[1-2]"),
        ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]
    );
    assert_eq!(
        names("node[01-02,07].ib"),
        ["node01.ib", "node02.ib", "node07.ib"]
    );
    // Three groups: Slurm's recursion makes the middle group outermost.
    assert_eq!(
        names("a[1-2]b[1-2]c[1-2]"),
        [
            "a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2"
        ]
    );
    // Duplicates are kept by the expansion, then merged (slots add up).
    assert_eq!(
        names_slots(&hf("n[1,1-2] slots=2")),
        ns(&[("n1", 4), ("n2", 2)])
    );
    assert_eq!(slurm::expand_nodelist("n[1,1]").unwrap(), ["n1", "n1"]);
    assert_eq!(
        slurm::expand_nodelist("n[01-02],login,m[3]").unwrap(),
        ["n01", "n02", "login", "m3"]
    );
}

#[test]
fn host_option() {
    let h = parse_host_option("a:2,b,node[1-2]:4").unwrap();
    assert_eq!(
        names_slots(&h),
        ns(&[("a", 2), ("b", 1), ("node1", 4), ("node2", 4)])
    );
    let h = parse_host_option("u@a, a:3").unwrap();
    assert_eq!(names_slots(&h), ns(&[("a", 4)]));
    assert_eq!(h[0].user.as_deref(), Some("u"));
    let e = parse_host_option("a,,b").unwrap_err();
    assert_eq!((e.line, e.column), (Some(1), Some(3)));
    let e = parse_host_option("a:0").unwrap_err();
    assert_eq!((e.line, e.column), (Some(1), Some(3)));
    let e = parse_host_option("n[1-2").unwrap_err();
    assert_eq!((e.line, e.column), (Some(1), Some(2)));
    assert!(e.report.contains("never closed"), "{e}");
}

#[test]
fn error_duplicated_slots() {
    assert_eq!(at("a\nnode1 slots=2 slots=4\n"), (2, 15));
    assert_eq!(at("node1:2 count=4\n"), (1, 9));
    let e = err("a\nnode1 slots=2 slots=4\n");
    assert_eq!(
        e.report,
        "hosts:2:15: the slot count is given twice on this line\n  |\n2 | node1 slots=2 slots=4\n  |               ^^^^^\n  = help: keep one `slots=N` (or `host:N`); to add slots, name the host on another line"
    );
}

#[test]
fn error_max_below_slots() {
    assert_eq!(at("n slots=4 max_slots=2"), (1, 11));
    assert!(
        err("n slots=4 max_slots=2")
            .report
            .contains("max_slots=2 is below slots=4")
    );
    assert_eq!(at("n max_slots=2 slots=4"), (1, 3));
}

#[test]
fn error_unknown_key_suggests_nearest() {
    let e = err("\n\nnode1 slot=2\n");
    assert_eq!((e.line, e.column), (Some(3), Some(7)));
    assert!(e.report.contains("unknown key `slot`"), "{e}");
    assert!(e.report.contains("did you mean `slots`?"), "{e}");
    assert!(
        err("n max_slot=3")
            .report
            .contains("did you mean `max_slots`?")
    );
    assert!(err("n ifhn=eth0").report.contains("known keys are"));
    assert_eq!(at("n cores=4"), (1, 3));
    assert_eq!(at("n 4"), (1, 3));
    assert!(err("n 4").report.contains("write `slots=4`"));
    assert_eq!(at("a b"), (1, 3));
}

#[test]
fn error_key_in_another_case_or_misspelt_names_the_key() {
    for (line, key, help) in [
        ("n SLOTS=2", "SLOTS", "keys are lower case: write `slots`"),
        ("n Slots=2", "Slots", "keys are lower case: write `slots`"),
        (
            "n MAX_SLOTS=4",
            "MAX_SLOTS",
            "keys are lower case: write `max_slots`",
        ),
        (
            "n Max-Slots=4",
            "Max-Slots",
            "keys are lower case: write `max-slots`",
        ),
        ("n USER=me", "USER", "keys are lower case: write `user`"),
        ("n CPU=2", "CPU", "keys are lower case: write `cpu`"),
        ("n SLOT=2", "SLOT", "did you mean `slots`?"),
        ("n maxslots=4", "maxslots", "did you mean `max_slots`?"),
        ("n max-slot=4", "max-slot", "did you mean `max-slots`?"),
        ("n Max_Slot=4", "Max_Slot", "did you mean `max_slots`?"),
    ] {
        let e = err(&format!("a\n{line}\n"));
        assert_eq!((e.line, e.column), (Some(2), Some(3)), "{line}: {e}");
        assert!(
            e.report
                .starts_with(&format!("hosts:2:3: unknown key `{key}`\n")),
            "{line}: {e}"
        );
        assert!(
            e.report.ends_with(&format!("= help: {help}")),
            "{line}: {e}"
        );
    }
    // The Open MPI spellings stay accepted.
    assert_eq!(hf("n max-slots=4")[0].max_slots, Some(4));
}

#[test]
fn error_ranges() {
    assert_eq!(at("x\n  n[5-3] slots=2"), (2, 5));
    assert!(err("n[5-3]").report.contains("descending range `5-3`"));
    assert_eq!(at("n[1-2 slots=2"), (1, 2));
    assert_eq!(at("n[1-2"), (1, 2));
    assert_eq!(at("n[1-2x]"), (1, 6));
    assert_eq!(at("n]"), (1, 2));
    assert_eq!(at("n[1-]"), (1, 5));
    assert_eq!(at("n[99999999999999999999999-2]"), (1, 3));
    let e = err("n[1-99999999]");
    assert_eq!((e.line, e.column), (Some(1), Some(1)));
    assert!(e.report.contains("limit of 65536"), "{e}");
    // The widest range there is: its count does not wrap to 0 (which let it through, to a
    // panic when it was expanded).
    let e = err("n[0-18446744073709551615]");
    assert_eq!((e.line, e.column), (Some(1), Some(1)));
    assert!(e.report.contains("limit of 65536"), "{e}");
    // The product counts too, without allocating it.
    assert!(
        err("a[1-1000]b[1-1000]")
            .report
            .contains("expands to 1000000")
    );
}

#[test]
fn error_user_names() {
    // `user=` holds to the characters of `user@host`: the launcher's parser got the rest.
    assert_eq!(at("n slots=2 user=a=b"), (1, 17));
    assert_eq!(at("n user=x@y"), (1, 9));
    assert_eq!(at("n user=a;b"), (1, 9));
    assert_eq!(
        err("n user=a]b").report,
        "hosts:1:9: the user name `a]b` has `]`, which a user name cannot have\n  |\n1 | n user=a]b\n  |         ^\n  = help: a user name has only letters, digits, `_`, `-` and `.`"
    );
    assert_eq!(
        hf("n user=first.last_2-x\n")[0].user.as_deref(),
        Some("first.last_2-x")
    );
}

#[test]
fn error_counts() {
    assert_eq!(at("n slots=0"), (1, 9));
    assert_eq!(at("n slots=two"), (1, 9));
    assert_eq!(at("n slots=99999999999"), (1, 9));
    assert_eq!(at("n:x"), (1, 3));
    assert_eq!(at("n slots="), (1, 3));
    assert_eq!(at("n:2:ib0"), (1, 4));
    assert_eq!(at("a slots=4294967295\na slots=1"), (2, 1));
}

#[test]
fn error_other_syntax() {
    assert_eq!(at("alice@\n"), (1, 7));
    assert_eq!(at("ok\n^bad\n"), (2, 1));
    assert_eq!(at("a\nb /* open\nc\n"), (2, 3));
    assert_eq!(at("a\n  !bad"), (2, 3));
    let e = err("a\n  !bad");
    assert!(
        e.report.starts_with("hosts:2:3: unexpected `!`; expected"),
        "{e}"
    );
    assert!(e.report.contains("\n2 |   !bad\n  |   ^\n"), "{e}");
    assert_eq!(at("a@n\nb@n\n"), (2, 1));
}

#[test]
fn syntax_reports_name_the_end_of_a_line_or_of_the_input() {
    let e = err("alice@\nb");
    assert!(
        e.report
            .starts_with("hosts:1:7: unexpected end of line; expected a host name\n"),
        "{e}"
    );
    let e = err("a\nalice@");
    assert!(
        e.report
            .starts_with("hosts:2:7: unexpected end of input; expected a host name\n"),
        "{e}"
    );
}

#[test]
fn an_empty_host_option_says_the_list_is_empty() {
    for text in ["", " ", "  \t"] {
        let e = parse_host_option(text).unwrap_err();
        assert!(
            e.report.starts_with("-H/--host: the host list is empty\n"),
            "{text:?}: {e}"
        );
        assert!(e.report.contains("-H node1:2,node2"), "{text:?}: {e}");
        assert_eq!((e.line, e.column), (None, None));
    }
}

#[test]
fn empty_file_is_no_hosts() {
    assert!(hf("").is_empty());
    assert!(hf("# nothing\n\n").is_empty());
}

#[test]
fn tasks_per_node() {
    assert_eq!(
        slurm::parse_tasks_per_node("2(x3),1").unwrap(),
        vec![2, 2, 2, 1]
    );
    assert_eq!(slurm::parse_tasks_per_node("4").unwrap(), vec![4]);
    assert_eq!(
        slurm::parse_tasks_per_node("1,3(x2)").unwrap(),
        vec![1, 3, 3]
    );
    let e = slurm::parse_tasks_per_node("2(x3,1").unwrap_err();
    assert_eq!(e.column, Some(2));
    let e = slurm::parse_tasks_per_node("2,0").unwrap_err();
    assert_eq!(e.column, Some(3));
    assert!(slurm::parse_tasks_per_node("2(x99999999999)").is_err());
    assert!(slurm::parse_tasks_per_node("2(x4294967295)").is_err());
    assert!(slurm::parse_tasks_per_node("").is_err());
}

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let v: Vec<(String, String)> = pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    move |k| v.iter().find(|(a, _)| a == k).map(|(_, b)| b.clone())
}

#[test]
fn slurm_environment() {
    let var = env(&[
        ("SLURM_JOB_ID", "42"),
        ("SLURM_JOB_NODELIST", "n[01-03],gpu7"),
        ("SLURM_TASKS_PER_NODE", "2(x3),1"),
    ]);
    let (h, src) = from_environment(&var).unwrap().unwrap();
    assert_eq!(
        src,
        HostSource::Slurm {
            job_id: "42".into()
        }
    );
    assert_eq!(
        names_slots(&h),
        ns(&[("n01", 2), ("n02", 2), ("n03", 2), ("gpu7", 1)])
    );
    let bad = env(&[
        ("SLURM_JOB_ID", "1"),
        ("SLURM_JOB_NODELIST", "n[1-2]"),
        ("SLURM_TASKS_PER_NODE", "1"),
    ]);
    assert!(
        from_environment(&bad)
            .unwrap()
            .unwrap_err()
            .report
            .contains("has 2 nodes")
    );
    let missing = env(&[("SLURM_JOB_ID", "1")]);
    assert!(from_environment(&missing).unwrap().is_err());
    // An empty job id is no job (it was "Slurm job " and chose srun); the older name counts.
    assert!(from_environment(&env(&[("SLURM_JOB_ID", " ")])).is_none());
    assert_eq!(
        slurm::job_id(&env(&[("SLURM_JOB_ID", ""), ("SLURM_JOBID", "9")])).as_deref(),
        Some("9")
    );
    let cpus = env(&[
        ("SLURM_JOB_ID", "1"),
        ("SLURM_NODELIST", "a"),
        ("SLURM_JOB_CPUS_PER_NODE", "8"),
    ]);
    assert_eq!(
        names_slots(&from_environment(&cpus).unwrap().unwrap().0),
        ns(&[("a", 8)])
    );
    assert!(from_environment(&env(&[])).is_none());
}

#[test]
fn pbs_environment() {
    let dir = std::env::temp_dir().join(format!("gsmrun-hosts-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("nodes");
    std::fs::write(&file, "n1\nn2\nn1\n\nn1\n").unwrap();
    let path = file.display().to_string();
    let var = env(&[("PBS_NODEFILE", path.as_str())]);
    let (h, src) = from_environment(&var).unwrap().unwrap();
    assert_eq!(src, HostSource::Pbs(file.clone()));
    assert_eq!(names_slots(&h), ns(&[("n1", 3), ("n2", 1)]));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(from_environment(&var).unwrap().is_err());
}

#[test]
fn pbs_names_in_two_cases_are_one_host() {
    let h = pbs::parse_nodefile(Path::new("nodes"), "vm\nVM\n# c\n  n2 # two\nN2\r\nvm\n").unwrap();
    assert_eq!(names_slots(&h), ns(&[("vm", 3), ("n2", 2)]));
}

#[test]
fn pbs_lines_with_more_than_a_name_are_refused_where_they_go_wrong() {
    let refused = |text: &str| pbs::parse_nodefile(Path::new("nodes"), text).unwrap_err();
    let e = refused("n1\nlocalhost slots=2\n");
    assert_eq!((e.line, e.column), (Some(2), Some(11)), "{e}");
    assert!(
        e.report
            .contains("`slots=2` follows the host name `localhost`"),
        "{e}"
    );
    assert!(e.report.contains("nodes:2:11"), "{e}");
    let e = refused("n1\n  n2:4\n");
    assert_eq!((e.line, e.column), (Some(2), Some(5)), "{e}");
    assert!(e.report.contains("`n2:4` is not a host name"), "{e}");
    let e = refused("n[1-2]\n");
    assert_eq!(e.column, Some(2), "{e}");
    let e = refused("n1\u{a0}\n");
    assert_eq!(e.column, Some(3), "{e}");
    let e = refused(&format!("{}\n", "a".repeat(MAX_NAME_LEN + 1)));
    assert!(e.report.contains("longer than"), "{e}");
    assert!(pbs::parse_nodefile(Path::new("nodes"), "# none\n\n").is_err());
}

fn example_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../hostfiles")
}

fn examples() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(example_dir()).expect("hostfiles/ exists") {
        let p = e.expect("dir entry").path();
        if p.extension().is_some_and(|x| x == "md") || !p.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&p).expect("readable example");
        out.push((p, text));
    }
    out.sort();
    out
}

#[test]
fn non_utf8_bytes_are_located() {
    let path = std::path::Path::new("hosts");
    let e = parse_hostfile_bytes(path, b"a\n# M\xfcller\n").unwrap_err();
    assert_eq!((e.line, e.column), (Some(2), Some(4)), "{e}");
    assert!(
        e.report.starts_with("hosts:2:4: byte 0xfc is not UTF-8"),
        "{e}"
    );
    // After a BOM, columns still count from the first character.
    let e = parse_hostfile_bytes(path, b"\xef\xbb\xbfa \xff\n").unwrap_err();
    assert_eq!((e.line, e.column), (Some(1), Some(3)), "{e}");
    let hosts = parse_hostfile_bytes(path, b"\xef\xbb\xbfa slots=2\n").unwrap();
    assert_eq!((hosts[0].name.as_str(), hosts[0].slots), ("a", 2));
}

#[test]
fn every_example_hostfile_parses() {
    let ex = examples();
    assert!(
        ex.len() >= 4,
        "expected one example per grammar, found {}",
        ex.len()
    );
    for (p, text) in ex {
        let hosts = parse_hostfile(&p, &text).unwrap_or_else(|e| panic!("{}:\n{e}", p.display()));
        assert!(!hosts.is_empty(), "{} names no host", p.display());
    }
}

/// xorshift64*: a tiny seeded generator, so a failure prints a seed that reproduces it.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    const INSERTS: &[&[u8]] = &[
        b"[",
        b"]",
        b"-",
        b"=",
        b":",
        b",",
        b"0",
        b"7",
        b"9",
        b"99999999999",
        b"@",
        b"#",
        b"/*",
        b"*/",
        b"//",
        b"\n",
        b"\r\n",
        b" ",
        b"slots",
        b"max_slots",
        b"\xef\xbb\xbf",
        b"\xff",
        b"^",
        b"[1-99999]",
        b"::",
    ];
    let mut v = base.to_vec();
    for _ in 0..1 + rng.below(6) {
        let pos = rng.below(v.len() + 1);
        match rng.below(4) {
            0 if !v.is_empty() => {
                let i = pos.min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            1 if pos < v.len() => {
                let end = (pos + 1 + rng.below(4)).min(v.len());
                v.drain(pos..end);
            }
            _ => {
                let ins = INSERTS[rng.below(INSERTS.len())];
                v.splice(pos..pos, ins.iter().copied());
            }
        }
    }
    v
}

#[test]
fn seeded_mutations_never_panic() {
    let mut bases: Vec<Vec<u8>> = examples()
        .into_iter()
        .map(|(_, t)| t.into_bytes())
        .collect();
    bases.push(b"a:2,b,node[1-2]:4".to_vec());
    bases.push(b"rack[1-2]-n[01-04,07] slots=2 max_slots=4".to_vec());
    let seed = std::env::var("GSM_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1234_u64);
    let iterations = 4000;
    for i in 0..iterations {
        let case_seed = seed.wrapping_add(i).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut rng = Rng(case_seed);
        let base = &bases[rng.below(bases.len())];
        let input = mutate(&mut rng, base);
        let text = String::from_utf8_lossy(&input).into_owned();
        let result = std::panic::catch_unwind(|| {
            let _ = parse_hostfile(Path::new("fuzz"), &text);
            let _ = parse_host_option(&text);
            let _ = slurm::expand_nodelist(&text);
            let _ = slurm::parse_tasks_per_node(&text);
        });
        assert!(
            result.is_ok(),
            "panic on case seed {case_seed:#x} (GSM_FUZZ_SEED={seed}), input {text:?}"
        );
    }
}

#[test]
fn mixed_example_merges_as_documented() {
    let path = example_dir().join("mixed.hosts");
    let text = std::fs::read_to_string(&path).expect("mixed.hosts");
    let h = parse_hostfile(&path, &text).expect("mixed.hosts parses");
    assert_eq!(
        names_slots(&h),
        ns(&[
            ("login1", 1),
            ("node01", 4),
            ("node02", 2),
            ("node03", 2),
            ("node04", 2),
            ("gpu1", 8),
            ("gpu2", 8)
        ])
    );
    // node01: `max-slots=4` on one line, none on the other (unlimited) → unlimited.
    assert_eq!(h[1].max_slots, None);
    assert_eq!(h[2].max_slots, Some(2));
    assert_eq!(h[5].user.as_deref(), Some("bob"));
    assert_eq!(h[5].max_slots, Some(8));
}

/// A mistake in `-H` is explained with the syntax of `-H`, not a hostfile line's (whose
/// `slots=N` the option does not take), and a bad count with the `host:N` it is written as.
#[test]
fn host_option_errors_show_the_host_option_syntax() {
    let e = parse_host_option("a slots=2").unwrap_err();
    assert!(
        e.report.starts_with("-H/--host:1:3: unexpected `s`")
            && e.report.contains("help: the list is `[user@]host[:N],...`")
            && !e.report.contains("slots=N"),
        "{e}"
    );
    let e = parse_host_option("a:x").unwrap_err();
    assert!(
        e.report.contains("slot count `x` is not a number") && e.report.contains("e.g. `host:4`"),
        "{e}"
    );
    // `host:` lacks its count, and a third field is refused without the hostfile's `slots=`.
    let e = parse_host_option("a:").unwrap_err();
    assert!(
        e.report
            .starts_with("-H/--host:1:2: nothing after `:`: the slot count is missing"),
        "{e}"
    );
    let e = parse_host_option("node1:2:x").unwrap_err();
    assert!(
        e.report.contains("a second `:` field") && !e.report.contains("slots="),
        "{e}"
    );
    // A hostfile line still shows the line's syntax.
    let e = err("a !\n");
    assert!(
        e.report
            .contains("help: a line is `[user@]host[:N] [slots=N] [max_slots=M]`"),
        "{e}"
    );
}
