//! Reading what `gsm-hello` ranks print, and checking a job's rank set.
//!
//! A rank prints `hello from rank R of N on HOST (pid P)` and, with `--print-personality`,
//! `rank R personality XXXXXXXX`. Lines may carry a prefix (`--tag-output`), so the parser looks for
//! the phrase anywhere in a line. This module knows nothing about how the job was started.

use std::collections::BTreeMap;

/// One rank's greeting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The rank.
    pub rank: u32,
    /// The job size the rank saw.
    pub size: u32,
    /// The host name the rank saw.
    pub host: String,
    /// The rank's process id.
    pub pid: u32,
}

/// Every `hello from rank …` line in `stdout`, in order.
pub fn hellos(stdout: &str) -> Vec<Hello> {
    stdout.lines().filter_map(parse_hello).collect()
}

fn parse_hello(line: &str) -> Option<Hello> {
    let rest = &line[line.find("hello from rank ")? + "hello from rank ".len()..];
    let (rank, rest) = rest.split_once(" of ")?;
    let (size, rest) = rest.split_once(" on ")?;
    let (host, rest) = rest.rsplit_once(" (pid ")?;
    let pid = rest.strip_suffix(')').unwrap_or(rest).trim();
    Some(Hello {
        rank: rank.trim().parse().ok()?,
        size: size.trim().parse().ok()?,
        host: host.trim().to_string(),
        pid: pid.parse().ok()?,
    })
}

/// Every `rank R personality XXXXXXXX` line in `stdout`, as rank → personality word.
pub fn personalities(stdout: &str) -> BTreeMap<u32, u32> {
    stdout
        .lines()
        .filter_map(|line| {
            let rest = &line[line.find("rank ")?..];
            let mut words = rest.split_whitespace().skip(1);
            let rank = words.next()?.parse().ok()?;
            (words.next()? == "personality").then_some(())?;
            let word = u32::from_str_radix(words.next()?.trim_start_matches("0x"), 16).ok()?;
            Some((rank, word))
        })
        .collect()
}

/// `personality(2)`'s flag that turns address-space randomisation off.
pub const ADDR_NO_RANDOMIZE: u32 = 0x0040000;

/// Checks that ranks 0..size each said hello exactly once and each saw `size`.
/// Returns a description of what is wrong, if anything.
pub fn check_ranks(hellos: &[Hello], size: u32) -> Result<(), String> {
    let mut problems = Vec::new();
    for rank in 0..size {
        let count = hellos.iter().filter(|hello| hello.rank == rank).count();
        if count != 1 {
            problems.push(format!(
                "rank {rank} said hello {count} times (expected once)"
            ));
        }
    }
    for hello in hellos {
        if hello.rank >= size {
            problems.push(format!("unexpected rank {} (job of {size})", hello.rank));
        }
        if hello.size != size {
            problems.push(format!(
                "rank {} saw a job of {} ranks, not {size}",
                hello.rank, hello.size
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_tagged_lines() {
        let out = "hello from rank 1 of 4 on h1 (pid 77)\n[1,0]<stdout>:hello from rank 0 of 4 on my host (pid 5)\nnoise\n";
        let got = hellos(out);
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0],
            Hello {
                rank: 1,
                size: 4,
                host: "h1".into(),
                pid: 77
            }
        );
        assert_eq!(got[1].host, "my host");
        assert_eq!(got[1].pid, 5);
    }

    #[test]
    fn parses_personality() {
        let map = personalities(
            "rank 0 personality 00040000\n[1,1]<stdout>:rank 1 personality 00000000\n",
        );
        assert_eq!(map.get(&0), Some(&ADDR_NO_RANDOMIZE));
        assert_eq!(map.get(&1), Some(&0));
    }

    #[test]
    fn rank_check_catches_duplicates_and_gaps() {
        let h = |rank, size| Hello {
            rank,
            size,
            host: "x".into(),
            pid: 1,
        };
        assert!(check_ranks(&[h(0, 2), h(1, 2)], 2).is_ok());
        assert!(check_ranks(&[h(0, 2), h(0, 2)], 2).is_err());
        assert!(check_ranks(&[h(0, 2), h(1, 3)], 2).is_err());
        assert!(check_ranks(&[h(0, 2)], 2).is_err());
    }
}
