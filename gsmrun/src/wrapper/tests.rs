use super::rank::slurm_local;

#[test]
fn a_slurm_task_finds_its_place_on_its_node() {
    fn env<'a>(pairs: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }
    let step = [
        ("SLURM_LOCALID", "1"),
        ("SLURM_NODEID", "3"),
        ("SLURM_STEP_TASKS_PER_NODE", "2(x3),1"),
    ];
    assert_eq!(slurm_local(&env(&step[..2])), None, "no step layout");
    let first = [
        ("SLURM_LOCALID", "0"),
        ("SLURM_NODEID", "3"),
        ("SLURM_STEP_TASKS_PER_NODE", "2(x3),1"),
    ];
    assert_eq!(slurm_local(&env(&first)), Some((0, 1)));
    let second = [
        ("SLURM_LOCALID", "1"),
        ("SLURM_NODEID", "2"),
        ("SLURM_STEP_TASKS_PER_NODE", "2(x3),1"),
    ];
    assert_eq!(slurm_local(&env(&second)), Some((1, 2)));
    // Inconsistent values are no place at all.
    assert_eq!(slurm_local(&env(&step)), None);
}
