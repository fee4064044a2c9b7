//! Which items are test code: `#[test]` functions and items under a `#[cfg(..)]` that cannot hold
//! outside a test build (`test`, `all(test, loom)`, but not `any(test, feature = "x")`).

use syn::{Attribute, Meta};

/// The truth of a cfg predicate in a build that is not a test: known, or open (a feature, a
/// target, `loom`: it may be on in some build).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Truth {
    True,
    False,
    Open,
}

/// Whether these attributes make their item test-only.
pub fn is_test_only(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        if a.path().is_ident("test") {
            return true;
        }
        if !a.path().is_ident("cfg") {
            return false;
        }
        match a.parse_args::<Meta>() {
            Ok(meta) => eval(&meta) == Truth::False,
            Err(_) => false,
        }
    })
}

fn eval(meta: &Meta) -> Truth {
    match meta {
        Meta::Path(p) if p.is_ident("test") || p.is_ident("doctest") => Truth::False,
        Meta::Path(_) | Meta::NameValue(_) => Truth::Open,
        Meta::List(list) => {
            let args = list
                .parse_args_with(
                    syn::punctuated::Punctuated::<Meta, syn::Token![,]>::parse_terminated,
                )
                .map(|p| p.into_iter().map(|m| eval(&m)).collect::<Vec<_>>());
            let Ok(args) = args else { return Truth::Open };
            if list.path.is_ident("not") {
                match args.as_slice() {
                    [Truth::True] => Truth::False,
                    [Truth::False] => Truth::True,
                    _ => Truth::Open,
                }
            } else if list.path.is_ident("all") {
                if args.contains(&Truth::False) {
                    Truth::False
                } else if args.iter().all(|t| *t == Truth::True) {
                    Truth::True
                } else {
                    Truth::Open
                }
            } else if list.path.is_ident("any") {
                if args.contains(&Truth::True) {
                    Truth::True
                } else if !args.is_empty() && args.iter().all(|t| *t == Truth::False) {
                    Truth::False
                } else {
                    Truth::Open
                }
            } else {
                Truth::Open
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_test_only;

    fn test_only(attr: &str) -> bool {
        let item: syn::ItemFn = syn::parse_str(&format!("{attr} fn f() {{}}")).unwrap();
        is_test_only(&item.attrs)
    }

    #[test]
    fn predicates_that_need_a_test_build_are_test_only() {
        assert!(test_only("#[cfg(test)]"));
        assert!(test_only("#[test]"));
        assert!(test_only("#[cfg(all(test, loom))]"));
        assert!(test_only("#[cfg(all(test, not(loom)))]"));
        assert!(test_only("#[cfg(not(not(test)))]"));
    }

    #[test]
    fn predicates_that_may_hold_outside_tests_are_not() {
        assert!(!test_only(""));
        assert!(!test_only("#[cfg(not(test))]"));
        assert!(!test_only("#[cfg(any(test, feature = \"ofi\"))]"));
        assert!(!test_only("#[cfg(loom)]"));
        assert!(!test_only("#[cfg(feature = \"rdma\")]"));
        assert!(!test_only("#[inline]"));
    }
}
