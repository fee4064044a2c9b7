use super::{first_mention, unresolved};
use std::time::Duration;

#[test]
fn the_first_whole_word_mention_is_found() {
    let text = "# nodeX is not here\nnode1x slots=2\n  node1 slots=1\nnode1\n";
    assert_eq!(first_mention(text, "node1"), Some((3, 3)));
    assert_eq!(first_mention(text, "node2"), None);
    assert_eq!(first_mention("a@node1:2\n", "node1"), Some((1, 3)));
}

#[test]
fn a_name_under_the_invalid_domain_does_not_resolve_and_localhost_does() {
    // `.invalid` is reserved (RFC 2606): no resolver may answer for it.
    let bad = unresolved(&["localhost", "x.invalid"], Duration::from_secs(5));
    assert_eq!(bad, vec!["x.invalid"]);
}
