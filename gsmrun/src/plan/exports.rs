//! The user's `-x` items: read once from the raw arguments into [`Export`]s, which every later
//! step of the plan takes, and the ones passed on to the ranks. A check of `-x` values belongs in
//! [`parse`], the only place that sees them as the user wrote them.

use gsm_contract::{CheckError, Layer};

use super::environment::Environment;
use crate::Error;
use crate::cli::Export;

/// Every `-x` of the command line, in order, refused (with the first bad one named) unless each
/// is `NAME` or `NAME=value` with a variable name.
pub(super) fn parse(raw: &[String]) -> Result<Vec<Export>, Error> {
    raw.iter()
        .map(|e| Export::parse(e).map_err(Error::Usage))
        .collect()
}

/// Each `-x` of a Gossamer setting checked against the settings table, so that a value every
/// rank would refuse stops the job before the launch: `-x NAME=value` as written, `-x NAME` as
/// gsmrun's environment has it. An unknown `GSM_*` name is refused only when it is close to a
/// setting's name (a typo, with the name it likely meant): one far from all of them may be the
/// program's own variable. The launcher's own variables are refused elsewhere, with their reason.
pub(super) fn check_settings(exports: &[Export], env: &Environment) -> Result<(), Error> {
    for e in exports {
        let launcher = gsm_contract::table::find(&e.name)
            .is_some_and(|s| matches!(s.layer, Layer::Launcher | Layer::Gsmrun));
        let value = match &e.value {
            Some(v) => v.clone(),
            None => match env.var(&e.name) {
                Some(v) => v,
                None => continue,
            },
        };
        match gsm_contract::check(&e.name, &value) {
            Ok(())
            | Err(CheckError::Unknown {
                suggestion: None, ..
            }) => {}
            Err(_) if launcher => {}
            Err(err) => return Err(Error::Usage(format!("-x {}={value}: {err}", e.name))),
        }
    }
    inherited_settings(exports, env)
}

/// The ranks' settings in gsmrun's own environment, which ranks on this host inherit (and which
/// no `-x` replaces), checked against the table as `-x` values are: `GSM_SLOT_SIZE=100 gsmrun
/// …` made every rank refuse to start, one report per rank, after the launch.
fn inherited_settings(exports: &[Export], env: &Environment) -> Result<(), Error> {
    let ranks = gsm_contract::table::ALL
        .iter()
        .filter(|s| !matches!(s.layer, Layer::Launcher | Layer::Gsmrun))
        .filter(|s| !exports.iter().any(|e| e.name == s.name))
        // `checks::threads` reads GSM_THREADS with `-t`, which replaces it.
        .filter(|s| s.name != gsm_contract::table::THREADS.name);
    for s in ranks {
        let Some(value) = env.var(s.name) else {
            continue;
        };
        if let Err(err) = gsm_contract::check(s.name, &value) {
            return Err(Error::Usage(format!(
                "{}={value} in gsmrun's environment, which the ranks inherit: {err} (unset it, \
                 or give the ranks another value with -x {}=VALUE)",
                s.name, s.name
            )));
        }
    }
    Ok(())
}

/// The `-x` variables passed on, with a warning in `warnings` for each that has no value.
///
/// `-x NAME` of a variable gsmrun's environment does not have is passed on as nothing, with
/// a word from gsmrun: Open MPI printed a warning of its own for it (about a variable
/// "requested to be forwarded but not found"), and MPICH and srun said nothing.
pub(super) fn passed(
    exports: &[Export],
    env: &Environment,
    warnings: &mut Vec<String>,
) -> Vec<Export> {
    exports
        .iter()
        .filter(|e| {
            // A value that is not UTF-8 is set all the same (the launcher passes it on).
            let unset = e.value.is_none() && env.var_os(&e.name).is_none();
            if unset {
                warnings.push(format!(
                    "gsmrun: warning: -x {0}: {0} is not set in gsmrun's environment, so the \
                     ranks do not get it (write -x {0}=VALUE to give it a value)",
                    e.name
                ));
            }
            !unset
        })
        .cloned()
        .collect()
}
