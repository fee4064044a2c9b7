//! `GSM_SPIN_HOST` reaches the idle rule: a rank's shared worker state built with the setting off
//! does not look at the host's runnable threads, and built with it unset or on does. The setting
//! is read from the environment, so each case runs this test again as a child process with its
//! own environment.

/// This test's name, for the child to run it alone.
const NAME: &str = "worker::spin_host_tests::the_spin_host_setting_reaches_the_idle_rule";
/// Set in a child: what it must find, `true` or `false`.
const EXPECT: &str = "GSM_TEST_SPIN_HOST_EXPECT";

#[test]
fn the_spin_host_setting_reaches_the_idle_rule() {
    use super::{Place, Shared};
    use crate::fabric::Doorbell;
    if let Ok(want) = std::env::var(EXPECT) {
        let sh = Shared::new(
            Place::single(1),
            vec![Doorbell::heap()],
            vec![None],
            1,
            false,
            crate::wire::ring::RingLayout::new(16, 4096).expect("a valid layout"),
        );
        assert_eq!(
            sh.host_aware.to_string(),
            want,
            "GSM_SPIN_HOST did not take effect"
        );
        println!("spin-host child checked");
        return;
    }
    for (value, want) in [(None, "true"), (Some("0"), "false"), (Some("on"), "true")] {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(EXPECT, want)
            .env_remove(gsm_contract::table::SPIN_HOST.name);
        if let Some(v) = value {
            cmd.env(gsm_contract::table::SPIN_HOST.name, v);
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("spin-host child checked"),
            "GSM_SPIN_HOST={value:?}: the child failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
