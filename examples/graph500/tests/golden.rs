//! The reference generator's published values (edgefactor 16), and validation accepting correct
//! searches and rejecting corrupted ones.

use graph500::bfs::{self, NO_PARENT};
use graph500::csr::Csr;
use graph500::kronecker::{EdgeList, KroneckerGenerator};
use graph500::roots::choose_roots;
use graph500::sssp;
use graph500::validate::{Claimed, ValidationError, validate};

struct Golden {
    scale: u32,
    self_loops: u64,
    isolated: Option<usize>,
    component_vertices: usize,
    component_edges: u64,
    first_roots: &'static [u32],
}

fn graph(scale: u32) -> (EdgeList, Csr) {
    let list = KroneckerGenerator::new(scale).range(0, 16 << scale);
    let g = Csr::build(1 << scale, &[&list], true);
    (list, g)
}

fn check(golden: &Golden) {
    let (list, g) = graph(golden.scale);
    let loops = list.edges.iter().filter(|e| e.is_self_loop()).count() as u64;
    assert_eq!(loops, golden.self_loops, "self-loops");
    if let Some(isolated) = golden.isolated {
        let n = (0..g.num_vertices() as u32)
            .filter(|&v| g.degree(v) == 0)
            .count();
        assert_eq!(n, isolated, "isolated vertices");
    }
    let roots = choose_roots(golden.scale, 64, |v| g.degree(v) > 0);
    assert_eq!(
        &roots[..golden.first_roots.len()],
        golden.first_roots,
        "roots"
    );
    let parent = bfs::direction_optimizing(&g, roots[0]);
    let reached = parent.iter().filter(|&&p| p != NO_PARENT).count();
    assert_eq!(reached, golden.component_vertices, "component vertices");
    let m = g.component_edges(|v| parent[v as usize] != NO_PARENT);
    assert_eq!(m, golden.component_edges, "component edges");

    // Both kernels validate, and validation counts the same m.
    let claimed = Claimed {
        root: roots[0],
        parent: &parent,
        dist: None,
    };
    assert_eq!(validate(&claimed, &[&list], m), Ok(m));
    let sp = sssp::dijkstra(&g, roots[0]);
    let claimed = Claimed {
        root: roots[0],
        parent: &sp.parent,
        dist: Some(&sp.dist),
    };
    assert_eq!(validate(&claimed, &[&list], m), Ok(m));
}

#[test]
fn scale_10() {
    check(&Golden {
        scale: 10,
        self_loops: 144,
        isolated: None,
        component_vertices: 897,
        component_edges: 16239,
        first_roots: &[458, 214, 220, 966, 395, 9, 848, 777],
    });
}

#[test]
fn scale_16() {
    check(&Golden {
        scale: 16,
        self_loops: 491,
        isolated: Some(18721),
        component_vertices: 46803,
        component_edges: 1_048_079,
        first_roots: &[29348, 8064, 61854, 29808, 54316, 22032],
    });
}

/// A vertex two or more levels below the root whose parent can be moved elsewhere.
fn deep_vertex(parent: &[u32], root: u32) -> u32 {
    (0..parent.len() as u32)
        .find(|&v| {
            let p = parent[v as usize];
            p != NO_PARENT && p != root && v != root
        })
        .expect("a vertex at depth two")
}

#[test]
fn validation_rejects_a_corrupted_parent() {
    let (list, g) = graph(10);
    let root = choose_roots(10, 1, |v| g.degree(v) > 0)[0];
    let mut parent = bfs::top_down(&g, root);
    let m = g.component_edges(|v| parent[v as usize] != NO_PARENT);
    let v = deep_vertex(&parent, root);
    // Re-parent v to the root itself: wrong unless v really is adjacent to the root (then the
    // level rule breaks instead, as v was at depth two).
    parent[v as usize] = root;
    let claimed = Claimed {
        root,
        parent: &parent,
        dist: None,
    };
    let err = validate(&claimed, &[&list], m).expect_err("corrupted parent must fail");
    assert!(err.total >= 1);
    // A cycle is caught by rule 1.
    let mut cyclic = bfs::top_down(&g, root);
    let w = deep_vertex(&cyclic, root);
    let p = cyclic[w as usize];
    cyclic[p as usize] = w;
    let claimed = Claimed {
        root,
        parent: &cyclic,
        dist: None,
    };
    let err = validate(&claimed, &[&list], m).expect_err("cycle must fail");
    assert!(
        matches!(err.errors[0], ValidationError::NotATree { .. }),
        "{err}"
    );
}

#[test]
fn validation_rejects_a_corrupted_distance_and_a_wrong_count() {
    let (list, g) = graph(10);
    let root = choose_roots(10, 1, |v| g.degree(v) > 0)[0];
    let sp = sssp::dijkstra(&g, root);
    let m = g.component_edges(|v| sp.parent[v as usize] != NO_PARENT);
    let v = deep_vertex(&sp.parent, root);
    for corrupt in [1e-6f32, -1e-6] {
        let mut dist = sp.dist.clone();
        dist[v as usize] += corrupt;
        let claimed = Claimed {
            root,
            parent: &sp.parent,
            dist: Some(&dist),
        };
        let err = validate(&claimed, &[&list], m).expect_err("corrupted distance must fail");
        assert!(
            err.errors.iter().any(
                |e| matches!(e, ValidationError::ParentNotJoined { vertex, .. } if *vertex == v)
            ),
            "{err}"
        );
    }
    let claimed = Claimed {
        root,
        parent: &sp.parent,
        dist: Some(&sp.dist),
    };
    let err = validate(&claimed, &[&list], m + 1).expect_err("wrong edge count must fail");
    assert_eq!(
        err.errors,
        vec![ValidationError::EdgeCount {
            reported: m + 1,
            counted: m
        }]
    );
}

#[test]
fn validation_rejects_a_search_that_stops_short() {
    let (list, g) = graph(10);
    let root = choose_roots(10, 1, |v| g.degree(v) > 0)[0];
    let mut parent = bfs::top_down(&g, root);
    // Drop a vertex that is nobody's parent: the tree stays a tree, but no longer spans.
    let leaf = (0..parent.len() as u32)
        .find(|&v| v != root && parent[v as usize] != NO_PARENT && !parent.contains(&v))
        .expect("a leaf");
    parent[leaf as usize] = NO_PARENT;
    let m = g.component_edges(|v| parent[v as usize] != NO_PARENT);
    let claimed = Claimed {
        root,
        parent: &parent,
        dist: None,
    };
    let err = validate(&claimed, &[&list], m).expect_err("a missed vertex must fail");
    // Every edge of the leaf leaves the tree now (and the half-counted edges skew the count).
    assert!(
        err.errors.iter().all(|e| match e {
            ValidationError::NotSpanning { unreached, .. } => *unreached == leaf,
            ValidationError::EdgeCount { .. } => true,
            _ => false,
        }),
        "{err}"
    );
    assert!(
        matches!(err.errors[0], ValidationError::NotSpanning { .. }),
        "{err}"
    );
}
