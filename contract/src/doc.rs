//! The reference page `docs/settings.md`, written from the table: a section per layer with each
//! setting's type, default, allowed values and doc, then the launch contract. The
//! `settings-doc` binary prints it; a test fails when the committed page differs.

use std::fmt::Write as _;

use crate::contract::{Build, FabricChoice, FabricKind, Stage, TCP_SEGMENT_SUFFIX, segment_name};
use crate::setting::{Fallback, Layer, Setting};

/// The command that rewrites the page, as the page and the test say it.
pub const REGENERATE: &str = "cargo run -q -p gsm-contract --bin settings-doc > docs/settings.md";

const INTRO: &str = "\
Every `GSM_*` environment variable of Gossamer, generated from the settings table
(`contract/src/table/`, crate `gsm-contract`). Do not edit this page by hand: change the table
and regenerate the page from the workspace root (a test of `gsm-contract` fails while the two
differ):

```sh
REGEN
```

How a setting is read:

- **Unset or blank means the default** (`export GSM_THREADS=` keeps it).
- **A value that is not allowed is an error**, never the default: the run (or `gsmrun`, before
  it starts anything) stops with one line naming the variable, its value and what is allowed. A
  value that is not UTF-8 is such an error too.
- **Switches** take `1`/`true`/`on`/`yes` or `0`/`false`/`off`/`no` in any case; **sizes** take
  bytes with an optional `K`, `M` or `G` suffix (powers of 1024); **counts** take digits only.
- **`gsmrun` passes every `GSM_*` variable of its environment to every rank**, as it does the
  values it sets itself and those of `-x NAME=VALUE`, so that ranks on other hosts see the same
  settings (ranks that disagree on one such as `GSM_SLOT_SIZE` would fail at start-up). It checks
  each of them against this table before launching: an unknown `GSM_*` name (with the closest
  setting when one is close) or a value not allowed ends it with status 2.
- `gsmrun` reads `GSM_LOG` (not `RUST_LOG`) for its own log and its rank wrappers', and passes it
  on, so `GSM_LOG=debug gsmrun …` shows every rank's log too; a `RUST_LOG` reaches the ranks only
  as any other variable does (`-x RUST_LOG`, or `srun`'s whole environment).
";

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn row(out: &mut String, s: &Setting) {
    let default = match s.default {
        Fallback::Value(v) => format!("`{v}`"),
        Fallback::Decided(why) => why.to_string(),
    };
    let _ = writeln!(
        out,
        "| `{}` | {} | {} | {} | {} |",
        s.name,
        s.kind.type_name(),
        cell(&default),
        cell(&s.kind.allowed()),
        cell(s.doc)
    );
}

fn contract(out: &mut String) {
    out.push_str("## The launch contract\n\n");
    out.push_str(
        "What `gsmrun` and the runtime must say alike, written once in `contract/src/contract.rs`\n\
         and used by both.\n\n",
    );
    out.push_str(
        "**Stages.** A rank sends one byte on `GSM_STATE_FD` as it enters each stage:\n\n",
    );
    out.push_str("| byte | stage |\n| --- | --- |\n");
    for s in Stage::ALL {
        let _ = writeln!(out, "| `{}` | {s:?} |", s.byte() as char);
    }
    let _ = write!(
        out,
        "\n**Segments.** Rank `r` of job `GSM_JOB_ID` names its `shm` segment `/dev/shm/{}` and\n\
         its tcp fabric's segment `{}{TCP_SEGMENT_SUFFIX}`; after a crash the rank wrapper and \
         `gsmrun`\nremove exactly such files.\n\n",
        segment_name("{GSM_JOB_ID}", 0).replace("-r0", "-r{r}"),
        segment_name("{GSM_JOB_ID}", 0).replace("-r0", "-r{r}"),
    );
    let _ = writeln!(
        out,
        "**Fabrics.** `GSM_FABRIC` and `gsmrun --fabric` name them alike (one list, \
         `contract/src/contract.rs`):\n\n- `auto`: {}.",
        FabricChoice::AUTO_OVER
    );
    for &k in FabricKind::ALL {
        let aliases: Vec<String> = k.aliases().iter().map(|a| format!(" (or `{a}`)")).collect();
        let build = match k.build() {
            Build::Always => String::new(),
            Build::Feature { feature, .. } => format!("; cargo feature `{feature}`"),
        };
        let _ = writeln!(
            out,
            "- `{}`{}: {}{build}.",
            k.name(),
            aliases.concat(),
            k.over()
        );
    }
}

/// The whole page for `settings`.
pub fn render(settings: &[Setting]) -> String {
    let mut out = String::from("# Settings\n\n");
    out.push_str(&INTRO.replace("REGEN", REGENERATE));
    for layer in Layer::ALL {
        let mine: Vec<&Setting> = settings.iter().filter(|s| s.layer == layer).collect();
        if mine.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "\n## {}\n\nRead by {}.\n\n| variable | type | default | allowed | what it does |\n\
             | --- | --- | --- | --- | --- |\n",
            layer.title(),
            layer.reader()
        );
        for s in mine {
            row(&mut out, s);
        }
    }
    out.push('\n');
    contract(&mut out);
    out
}
