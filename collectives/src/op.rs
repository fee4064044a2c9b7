//! Reduction operators: how two contributions combine, element by element.
//!
//! [`Sum`], [`Prod`], [`Min`], [`Max`] work on every primitive number type; [`BitAnd`],
//! [`BitOr`], [`BitXor`] on the integers; any closure `Fn(T, T) -> T` is an operator too. An
//! operator must be associative. `reduce` and `allreduce` also assume it is commutative (the
//! order in which contributions meet follows the algorithm, not the member order); `scan` and
//! `exscan` combine in member order (`x0 ⊕ x1 ⊕ …`), so they accept non-commutative operators.
//! Every member of an `allreduce` receives the same bits: each partial result is computed once
//! and copied, or computed in the same order on every member.
//!
//! Integer `Sum` and `Prod` wrap on overflow (as MPI's do in practice) rather than panic in debug
//! builds; float `Min`/`Max` follow `f64::min`/`max` (a NaN loses to a number).

/// An element-wise reduction operator.
pub trait Op<T> {
    /// `a ⊕ b`.
    fn apply(&self, a: T, b: T) -> T;

    /// `acc[i] = acc[i] ⊕ x[i]`, or `x[i] ⊕ acc[i]` when `x_first` (x comes from lower members).
    fn fold(&self, acc: &mut [T], x: &[T], x_first: bool)
    where
        T: Copy,
    {
        debug_assert_eq!(acc.len(), x.len());
        if x_first {
            for (a, &b) in acc.iter_mut().zip(x) {
                *a = self.apply(b, *a);
            }
        } else {
            for (a, &b) in acc.iter_mut().zip(x) {
                *a = self.apply(*a, b);
            }
        }
    }
}

impl<T, F: Fn(T, T) -> T> Op<T> for F {
    fn apply(&self, a: T, b: T) -> T {
        self(a, b)
    }
}

/// `a + b` (integers wrap).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sum;
/// `a × b` (integers wrap).
#[derive(Debug, Clone, Copy, Default)]
pub struct Prod;
/// The smaller.
#[derive(Debug, Clone, Copy, Default)]
pub struct Min;
/// The larger.
#[derive(Debug, Clone, Copy, Default)]
pub struct Max;
/// `a & b`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BitAnd;
/// `a | b`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BitOr;
/// `a ^ b`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BitXor;

macro_rules! int_ops {
    ($($t:ty)*) => {$(
        impl Op<$t> for Sum {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t { a.wrapping_add(b) }
            fn fold(&self, acc: &mut [$t], x: &[$t], _: bool) {
                for (a, &b) in acc.iter_mut().zip(x) { *a = a.wrapping_add(b); }
            }
        }
        impl Op<$t> for Prod {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t { a.wrapping_mul(b) }
        }
        impl Op<$t> for Min {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t { a.min(b) }
        }
        impl Op<$t> for Max {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t { a.max(b) }
        }
        impl Op<$t> for BitAnd {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t { a & b }
        }
        impl Op<$t> for BitOr {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t { a | b }
        }
        impl Op<$t> for BitXor {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t { a ^ b }
        }
    )*};
}
int_ops!(u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize);

macro_rules! float_ops {
    ($($t:ty)*) => {$(
        impl Op<$t> for Sum {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t { a + b }
            // `a + b == b + a` bit for bit in IEEE 754, so the order flag does not matter.
            fn fold(&self, acc: &mut [$t], x: &[$t], _: bool) {
                for (a, &b) in acc.iter_mut().zip(x) { *a += b; }
            }
        }
        impl Op<$t> for Prod {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t { a * b }
        }
        impl Op<$t> for Min {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t { a.min(b) }
        }
        impl Op<$t> for Max {
            #[inline]
            fn apply(&self, a: $t, b: $t) -> $t { a.max(b) }
        }
    )*};
}
float_ops!(f32 f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_and_closure_operators_fold_in_the_requested_order() {
        let mut acc = [1u32, 5, 250];
        Sum.fold(&mut acc, &[2, 3, 10], false);
        assert_eq!(acc, [3, 8, 260]);
        let mut m = [1.5f64, -2.0];
        Max.fold(&mut m, &[0.5, 3.0], false);
        assert_eq!(m, [1.5, 3.0]);
        // A non-commutative closure: "keep the left operand".
        let left = |a: u8, _b: u8| a;
        let mut k = [1u8, 1];
        left.fold(&mut k, &[9, 9], true);
        assert_eq!(k, [9, 9]);
        left.fold(&mut k, &[7, 7], false);
        assert_eq!(k, [9, 9]);
        assert_eq!(Op::<u8>::apply(&Sum, 255, 2), 1, "integers wrap");
        assert_eq!(Op::<u16>::apply(&BitXor, 0b1100, 0b1010), 0b0110);
    }
}
