//! The run-time half: what the build baked into the crate (compiled variants, one
//! plan per tuning table) and the loaded form the generated `launch` dispatches on.
//!
//! Choosing a variant is a call through a `fn(u64) -> Choice` that is a plain
//! `match` on the key: no hashing, no locks, no allocation, no host synchronisation,
//! so dispatch is safe inside CUDA-graph capture.

use std::fmt;
use std::sync::Arc;

use cudarc::driver::{CudaContext, DriverError};

use crate::gpu::GpuIdentity;
use crate::{KernelSpec, Params, Variant};

/// Everything the build baked for one kernel.
#[derive(Debug)]
pub struct Baked {
    pub kernel: &'static str,
    /// Compiled variants, indexed by [`Choice::Variant`].
    pub images: &'static [Image],
    /// One plan per tuning table whose fingerprint matched at build time, and per
    /// tuned shape of a kernel with `shapes` (its GPU's plans are consecutive).
    pub plans: &'static [Plan],
    /// The names of the shape arguments (`["n", "k"]`); empty without shapes.
    pub shape_args: &'static [&'static str],
    /// What [`Choice::Fallback`] runs, as `describe` says it: `fallback`, or the
    /// vendor library's name (`cuBLAS`).
    pub fallback: &'static str,
    /// The plan for any other GPU (and for every GPU without a table): the declared
    /// fallback everywhere where there is one (the library's launch keeps its
    /// behaviour until a table says otherwise), else the declared default.
    pub defaults: Plan,
    /// What the build did for this kernel and why (tuned, table baked, defaults).
    pub note: &'static str,
    /// Why `images` carry no binaries, when nvcc was unavailable at build time.
    pub not_compiled: Option<&'static str>,
}

/// One compiled point of the space (a fatbin: machine code plus PTX).
#[derive(Debug)]
pub struct Image {
    pub name: &'static str,
    pub values: &'static [u32],
    pub binary: &'static [u8],
}

/// Which variant owns each range of the key, for one GPU model (or the defaults).
#[derive(Debug)]
pub struct Plan {
    /// The table this plan came from; `None` for the defaults plan.
    pub origin: Option<TableOrigin>,
    /// The shape it was tuned at (a value per [`Baked::shape_args`]); empty for a
    /// kernel without shapes and for the defaults plan.
    pub shape: &'static [u64],
    pub ranges: &'static [Range],
    /// The ranges as a `match` (generated from the same data).
    pub select: fn(u64) -> Choice,
    /// The ranges a shape that was not tuned gets from this plan: a variant keeps a
    /// range only where it led the incumbent (the fallback, else the default
    /// variant) by `autotune_table::ranges::BORROW_LEAD` at every key measured
    /// inside it, the incumbent elsewhere; the same as `ranges` for a kernel
    /// without shapes.
    pub borrowed: &'static [Range],
    /// `borrowed` as a `match`.
    pub select_borrowed: fn(u64) -> Choice,
    /// Which keys were measured and what the keys above them get
    /// (`measured up to m=16384 ...; above it, the pick there (extrapolated)`);
    /// empty for the defaults plan.
    pub above: &'static str,
    /// The vendor's own point (`vendor_points = N`) that [`Choice::Fallback`] runs
    /// at each key of this plan's shape, as the sweep timed it as the incumbent
    /// there: a `match` like `select`, `None` where the vendor's default launch
    /// runs (every key of a plan without vendor points, and every shape that only
    /// borrows this plan: a vendor's point is chosen for one problem).
    pub vendor_point: fn(u64) -> Option<&'static [u32]>,
    /// The ranges of the key where `vendor_point` gives a point, by the point's
    /// name (`cuBLAS@1f0c3a9e`, its table variant without `vendor:`), ascending:
    /// what [`Baked::describe`] and [`Loaded::describe_in`] print.
    pub vendor_ranges: &'static [PointRange],
}

/// A range of the key where the vendor runs one of its own points, by the point's
/// name.
pub type PointRange = autotune_spec::KeyRange<&'static str>;

/// [`Plan::vendor_point`] of a plan without vendor points.
fn no_vendor_point(_key: u64) -> Option<&'static [u32]> {
    None
}

/// Where a plan was tuned.
#[derive(Debug)]
pub struct TableOrigin {
    /// The table file, relative to the crate root.
    pub path: &'static str,
    pub gpu: &'static str,
    pub compute_capability: (u32, u32),
    pub sm_count: u32,
}

/// `first..=last` of the key launches `choice`.
pub type Range = autotune_spec::KeyRange<Choice>;

// Const constructors for the generated code (and the macro's stand-in in build.rs):
// a field added here gets its default in one place, not in every generator.
impl Baked {
    #[doc(hidden)]
    pub const fn new(kernel: &'static str, images: &'static [Image], defaults: Plan) -> Self {
        Self {
            kernel,
            images,
            plans: &[],
            shape_args: &[],
            fallback: "fallback",
            defaults,
            note: "",
            not_compiled: None,
        }
    }

    #[doc(hidden)]
    pub const fn with_plans(self, plans: &'static [Plan]) -> Self {
        Self { plans, ..self }
    }

    #[doc(hidden)]
    pub const fn with_shape_args(self, shape_args: &'static [&'static str]) -> Self {
        Self { shape_args, ..self }
    }

    #[doc(hidden)]
    pub const fn with_fallback(self, fallback: &'static str) -> Self {
        Self { fallback, ..self }
    }

    #[doc(hidden)]
    pub const fn with_note(self, note: &'static str) -> Self {
        Self { note, ..self }
    }

    #[doc(hidden)]
    pub const fn not_compiled(self, reason: &'static str) -> Self {
        Self {
            not_compiled: Some(reason),
            ..self
        }
    }
}

impl Image {
    #[doc(hidden)]
    pub const fn new(name: &'static str, values: &'static [u32], binary: &'static [u8]) -> Self {
        Self {
            name,
            values,
            binary,
        }
    }
}

impl Plan {
    /// The plan of no table: `ranges` for every shape, nothing measured.
    #[doc(hidden)]
    pub const fn defaults(ranges: &'static [Range], select: fn(u64) -> Choice) -> Self {
        Self {
            origin: None,
            shape: &[],
            ranges,
            select,
            borrowed: ranges,
            select_borrowed: select,
            above: "",
            vendor_point: no_vendor_point,
            vendor_ranges: &[],
        }
    }

    #[doc(hidden)]
    pub const fn from_table(self, origin: TableOrigin) -> Self {
        Self {
            origin: Some(origin),
            ..self
        }
    }

    #[doc(hidden)]
    pub const fn at_shape(self, shape: &'static [u64]) -> Self {
        Self { shape, ..self }
    }

    #[doc(hidden)]
    pub const fn lending(self, borrowed: &'static [Range], select: fn(u64) -> Choice) -> Self {
        Self {
            borrowed,
            select_borrowed: select,
            ..self
        }
    }

    #[doc(hidden)]
    pub const fn above(self, above: &'static str) -> Self {
        Self { above, ..self }
    }

    #[doc(hidden)]
    pub const fn with_vendor_points(
        self,
        vendor_point: fn(u64) -> Option<&'static [u32]>,
        vendor_ranges: &'static [PointRange],
    ) -> Self {
        Self {
            vendor_point,
            vendor_ranges,
            ..self
        }
    }

    /// The name of the vendor's point this plan's fallback runs at `key`, if any.
    fn point_name(&self, key: u64) -> Option<&'static str> {
        self.vendor_ranges
            .iter()
            .find(|range| range.contains(key))
            .map(|range| range.choice)
    }

    /// `range` (its choice the fallback) cut where the vendor's points change:
    /// each piece's first and last key, and its point's name (`None`: the default
    /// launch).
    fn fallback_pieces(&self, range: &Range) -> Vec<(u64, u64, Option<&'static str>)> {
        let mut pieces = Vec::new();
        let mut next = range.first;
        for point in self.vendor_ranges {
            let (first, last) = (point.first.max(range.first), point.last.min(range.last));
            if first > last {
                continue;
            }
            if next < first {
                pieces.push((next, first - 1, None));
            }
            pieces.push((first, last, Some(point.choice)));
            next = last.saturating_add(1);
            if last == range.last {
                return pieces;
            }
        }
        pieces.push((next, range.last, None));
        pieces
    }
}

impl TableOrigin {
    #[doc(hidden)]
    pub const fn new(
        path: &'static str,
        gpu: &'static str,
        compute_capability: (u32, u32),
        sm_count: u32,
    ) -> Self {
        Self {
            path,
            gpu,
            compute_capability,
            sm_count,
        }
    }
}

/// What dispatch launches for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The variant at this index of [`Baked::images`].
    Variant(usize),
    /// The wrapper's declared fallback kernel.
    Fallback,
}

/// Which plan a loaded kernel dispatches with, and why: inspect it once after load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// The tuning table measured on this GPU model.
    Tuned {
        table: &'static str,
        gpu: GpuIdentity,
        /// Which keys the table measured, and what the keys above them get.
        above: &'static str,
    },
    /// The declared default (and fallback), with the reason no table applies.
    Defaults { gpu: GpuIdentity, reason: String },
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tuned {
                table,
                gpu,
                above: "",
            } => write!(f, "tuned for {gpu} ({table})"),
            Self::Tuned { table, gpu, above } => write!(f, "tuned for {gpu} ({table}); {above}"),
            Self::Defaults { gpu, reason } => write!(f, "defaults on {gpu}: {reason}"),
        }
    }
}

/// Loading a kernel's variants failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("`{kernel}` has no compiled variants: {reason}")]
    NotCompiled {
        kernel: &'static str,
        reason: &'static str,
    },
    #[error("loading variant {variant} of `{kernel}`: {source}")]
    Module {
        kernel: &'static str,
        variant: &'static str,
        source: DriverError,
    },
    #[error("variant {variant} of `{kernel}` does not fit its params type (rebuild the crate)")]
    Params {
        kernel: &'static str,
        variant: &'static str,
    },
    #[error("querying the GPU: {0}")]
    Driver(#[from] DriverError),
    #[error("loading the vendor fallback: {0}")]
    Vendor(crate::LaunchError),
}

impl Baked {
    /// The plans for `gpu` (one per tuned shape): its table's if one matched at
    /// build time and was measured on the same model, else the defaults (with the
    /// reason).
    pub fn plans_for(&'static self, gpu: &GpuIdentity) -> (Vec<&'static Plan>, Selection) {
        let matching: Vec<&'static Plan> = self
            .plans
            .iter()
            .filter(|plan| {
                plan.origin.as_ref().is_some_and(|o| {
                    o.gpu == gpu.name
                        && o.compute_capability == gpu.compute_capability
                        && o.sm_count == gpu.sm_count
                })
            })
            .collect();
        if let Some(origin) = matching.first().and_then(|plan| plan.origin.as_ref()) {
            let selection = Selection::Tuned {
                table: origin.path,
                gpu: gpu.clone(),
                above: matching[0].above,
            };
            return (matching, selection);
        }
        let reason = if self.plans.is_empty() {
            self.note.to_string()
        } else {
            let mut tuned: Vec<String> = self
                .plans
                .iter()
                .filter_map(|p| p.origin.as_ref())
                .map(|o| {
                    format!(
                        "{} (sm_{}{}, {} SMs)",
                        o.gpu, o.compute_capability.0, o.compute_capability.1, o.sm_count
                    )
                })
                .collect();
            tuned.dedup();
            format!(
                "no tuning table for this GPU; tables baked for: {}",
                tuned.join(", ")
            )
        };
        (
            vec![&self.defaults],
            Selection::Defaults {
                gpu: gpu.clone(),
                reason,
            },
        )
    }

    /// The first plan for `gpu` (the only one without shapes); see [`Baked::plans_for`].
    pub fn plan_for(&'static self, gpu: &GpuIdentity) -> (&'static Plan, Selection) {
        let (plans, selection) = self.plans_for(gpu);
        (plans.first().copied().unwrap_or(&self.defaults), selection)
    }
}

/// What a call at `shape` launches for `key`, among one GPU's plans (one per tuned
/// shape, never none): the `match` of `shape`'s own plan, else the borrowed `match` of
/// the nearest tuned shape's ([`Plan::select_borrowed`]).
pub fn choose_in(plans: &[&'static Plan], shape: &[u64], key: u64) -> Choice {
    let (plan, exact) = plan_for_shape(plans, shape);
    if exact {
        (plan.select)(key)
    } else {
        (plan.select_borrowed)(key)
    }
}

/// The vendor's point a call at `shape` runs for `key` where its plan gives the
/// fallback (see [`Plan::vendor_point`]): that of `shape`'s own plan; `None` (the
/// vendor's default launch) at a shape that only borrows a plan.
pub fn vendor_point_in(plans: &[&'static Plan], shape: &[u64], key: u64) -> Option<&'static [u32]> {
    match plan_for_shape(plans, shape) {
        (plan, true) => (plan.vendor_point)(key),
        (_, false) => None,
    }
}

/// Among one GPU's plans (one per tuned shape, never none), the plan of `shape`, else
/// of the nearest tuned shape ([`autotune_spec::shape::nearest`]); and whether it was tuned
/// at `shape` itself.
fn plan_for_shape(plans: &[&'static Plan], shape: &[u64]) -> (&'static Plan, bool) {
    if let [only] = plans {
        return (only, only.shape == shape);
    }
    match autotune_spec::shape::nearest(plans.iter().map(|p| p.shape), shape) {
        Some((index, exact)) => (plans[index], exact),
        None => (plans[0], false),
    }
}

/// A kernel's baked variants loaded on one device, with the plan for that device.
#[derive(Debug)]
pub struct Loaded<P> {
    variants: Vec<Variant<P>>,
    /// One per tuned shape (never empty: the defaults plan stands alone).
    plans: Vec<&'static Plan>,
    baked: &'static Baked,
    selection: Selection,
    default: usize,
}

impl<P: Params> Loaded<P> {
    /// Picks the plan for the device of `ctx` and loads every baked variant.
    pub fn load(
        ctx: &Arc<CudaContext>,
        spec: &KernelSpec,
        baked: &'static Baked,
    ) -> Result<Self, LoadError> {
        let gpu = GpuIdentity::of(ctx)?;
        let (plans, selection) = baked.plans_for(&gpu);
        if let Some(reason) = baked.not_compiled {
            return Err(LoadError::NotCompiled {
                kernel: baked.kernel,
                reason,
            });
        }
        let mut variants = Vec::with_capacity(baked.images.len());
        for image in baked.images {
            let params = P::from_values(image.values).ok_or(LoadError::Params {
                kernel: baked.kernel,
                variant: image.name,
            })?;
            let variant = Variant::load(ctx, image.binary, spec.entries, image.name, params)
                .map_err(|source| LoadError::Module {
                    kernel: baked.kernel,
                    variant: image.name,
                    source,
                })?;
            variants.push(variant);
        }
        let default = baked
            .images
            .iter()
            .position(|image| image.values == spec.default)
            .ok_or(LoadError::NotCompiled {
                kernel: baked.kernel,
                reason: "the default variant was not baked",
            })?;
        Ok(Self {
            variants,
            plans,
            baked,
            selection,
            default,
        })
    }

    /// What to launch for `key` (a kernel without shapes): one `match`.
    #[inline]
    pub fn choose(&self, key: u64) -> Choice {
        (self.plans[0].select)(key)
    }

    /// What to launch for `key` at `shape` (a value per shape argument): the plan
    /// of that shape, else what the nearest tuned one lends ([`choose_in`]), then one
    /// `match` on the key. No allocation, no lock, no host synchronisation.
    #[inline]
    pub fn choose_in(&self, shape: &[u64], key: u64) -> Choice {
        choose_in(&self.plans, shape, key)
    }

    /// The vendor's point that [`Choice::Fallback`] runs for `key` (a kernel
    /// without shapes; see [`Plan::vendor_point`]): `None` for its default launch.
    #[inline]
    pub fn vendor_point(&self, key: u64) -> Option<&'static [u32]> {
        (self.plans[0].vendor_point)(key)
    }

    /// The vendor's point for `key` at `shape`: the point of that shape's own
    /// plan, `None` at a shape that only borrows one (one `match`, as
    /// [`Loaded::choose_in`]).
    #[inline]
    pub fn vendor_point_in(&self, shape: &[u64], key: u64) -> Option<&'static [u32]> {
        vendor_point_in(&self.plans, shape, key)
    }

    /// The plan `shape` dispatches with, and whether it was tuned at that shape.
    pub fn plan_of(&self, shape: &[u64]) -> (&'static Plan, bool) {
        plan_for_shape(&self.plans, shape)
    }

    /// Which plan `shape` uses and why, in words: `n=4096,k=4096 (tuned)`, or
    /// `n=8192,k=4096 is not tuned: the plan of n=14336,k=4096, the nearest (...)`.
    pub fn shape_rule(&self, shape: &[u64]) -> String {
        let names = self.baked.shape_args;
        let asked = crate::Shape::new(names, shape);
        let (plan, exact) = self.plan_of(shape);
        if plan.origin.is_none() {
            return format!("{asked}: the defaults (no tuned plan for this GPU was baked)");
        }
        if exact {
            return format!("{asked}: its own plan (tuned at this shape)");
        }
        let tuned = crate::Shape::new(names, plan.shape);
        let lent = self.lent(plan);
        format!(
            "{asked} is not tuned: the plan of {tuned}, the nearest by sum of |log2 ratio| ({:.2}){lent}",
            autotune_spec::shape::distance(plan.shape, shape)
        )
    }

    /// `; it keeps 1 of its 3 ranges, ...`: what a plan lends a shape it was not
    /// tuned at, where that is not the whole plan.
    fn lent(&self, plan: &Plan) -> String {
        let kept = |r: &&Range| {
            (plan.select_borrowed)(r.first) == r.choice
                && (plan.select_borrowed)(r.last) == r.choice
        };
        let Some(taken) = plan.ranges.iter().find(|r| !kept(r)) else {
            return String::new();
        };
        // What a range that is not lent launches: the incumbent.
        let incumbent = self.name_of((plan.select_borrowed)(taken.first));
        format!(
            "; it lends {} of its {} ranges, those that led {incumbent} (the incumbent) by \
             enough there; the rest launch {incumbent}",
            plan.ranges.iter().filter(kept).count(),
            plan.ranges.len(),
        )
    }

    /// The variant at `index` of the baked images.
    #[inline]
    pub fn variant(&self, index: usize) -> &Variant<P> {
        &self.variants[index]
    }

    /// Every baked variant (the default and each one a plan names).
    pub fn variants(&self) -> &[Variant<P>] {
        &self.variants
    }

    /// The declared default variant.
    #[inline]
    pub fn default_variant(&self) -> &Variant<P> {
        &self.variants[self.default]
    }

    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// The ranges of the plan in use, for a kernel without shapes (with shapes,
    /// [`Loaded::ranges_in`]).
    pub fn ranges(&self) -> &'static [Range] {
        self.plans[0].ranges
    }

    /// The shapes the plans in use were tuned at; empty where the defaults are in
    /// use.
    pub fn tuned_shapes(&self) -> Vec<&'static [u64]> {
        self.plans
            .iter()
            .filter(|plan| plan.origin.is_some())
            .map(|plan| plan.shape)
            .collect()
    }

    /// The ranges of the plan `shape` uses.
    pub fn ranges_in(&self, shape: &[u64]) -> &'static [Range] {
        match self.plan_of(shape) {
            (plan, true) => plan.ranges,
            (plan, false) => plan.borrowed,
        }
    }

    /// The name of what `key` dispatches to (`block=128,stages=2`, `fallback`, the
    /// vendor library's name, or the vendor's point: `cuBLAS@1f0c3a9e`).
    pub fn describe(&self, key: u64) -> &str {
        self.name_at(self.plans[0], true, self.choose(key), key)
    }

    /// [`Loaded::describe`] at `shape`.
    pub fn describe_in(&self, shape: &[u64], key: u64) -> &str {
        let (plan, own) = self.plan_of(shape);
        self.name_at(plan, own, self.choose_in(shape, key), key)
    }

    /// What `choice` at `key` is called, a vendor's point named where `plan` is
    /// the call's own (`own`; a borrowed plan runs the default launch).
    fn name_at(&self, plan: &Plan, own: bool, choice: Choice, key: u64) -> &str {
        let point = (choice == Choice::Fallback && own)
            .then(|| plan.point_name(key))
            .flatten();
        point.unwrap_or_else(|| self.name_of(choice))
    }

    fn name_of(&self, choice: Choice) -> &str {
        match choice {
            Choice::Variant(index) => self.variants[index].name(),
            Choice::Fallback => self.baked.fallback,
        }
    }
}

impl Baked {
    /// What dispatch launches per range, per plan, as readable lines: for examples,
    /// logs and machines without a GPU; ends with why nothing was compiled, where
    /// that is so.
    pub fn describe(&self, key: &str) -> String {
        let mut out = self.describe_plans(key);
        if let Some(reason) = self.not_compiled {
            out.push_str(&format!("  not compiled: {reason}\n"));
        }
        out
    }

    /// [`Baked::describe`] without the reason nothing was compiled: for a listing of
    /// several kernels, which says that reason once ([`Baked::not_compiled`]).
    pub fn describe_plans(&self, key: &str) -> String {
        let mut out = format!("{}\n", self.note);
        let name = |choice: Choice| match choice {
            Choice::Variant(index) => self.images.get(index).map_or("?", |i| i.name).to_string(),
            Choice::Fallback => self.fallback.to_string(),
        };
        let mut last_origin = None;
        for plan in self.plans {
            if let Some(origin) = &plan.origin
                && last_origin != Some(origin.path)
            {
                last_origin = Some(origin.path);
                out.push_str(&format!(
                    "  on {} (sm_{}{}, {} SMs), from {}:\n",
                    origin.gpu,
                    origin.compute_capability.0,
                    origin.compute_capability.1,
                    origin.sm_count,
                    origin.path
                ));
            }
            if !plan.shape.is_empty() {
                out.push_str(&format!(
                    "   at {}:\n",
                    crate::Shape::new(self.shape_args, plan.shape)
                ));
            }
            for range in plan.ranges {
                let pieces = match range.choice {
                    Choice::Fallback => plan.fallback_pieces(range),
                    Choice::Variant(_) => vec![(range.first, range.last, None)],
                };
                for (first, last, point) in pieces {
                    let span = if last == u64::MAX {
                        format!("{key} >= {first}")
                    } else {
                        format!("{key} in {first}..={last}")
                    };
                    let shown = point.map_or_else(|| name(range.choice), str::to_string);
                    out.push_str(&format!("    {span:<32} {shown}\n"));
                }
            }
            if !plan.above.is_empty() {
                out.push_str(&format!("    ({})\n", plan.above));
            }
            if plan.borrowed != plan.ranges {
                let lent: Vec<String> = plan
                    .borrowed
                    .iter()
                    .filter(|r| r.choice != Choice::Fallback)
                    .map(|r| format!("{}..={} {}", r.first, r.last, name(r.choice)))
                    .collect();
                let lent = if lent.is_empty() {
                    format!("none of these ranges, {} for every {key}", self.fallback)
                } else {
                    format!("only {}", lent.join(", "))
                };
                out.push_str(&format!(
                    "    (a shape not tuned that is nearest this one: {lent})\n"
                ));
            }
        }
        // Without a table the note says what runs everywhere; there is no "other".
        if !self.plans.is_empty() {
            out.push_str(&format!(
                "  on any other GPU: {} for every {key}\n",
                name((self.defaults.select)(0))
            ));
        }
        if self.not_compiled.is_some() {
            out.push_str("  not compiled (no kernel binaries: load() fails)\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant_0(_key: u64) -> Choice {
        Choice::Variant(0)
    }

    fn fallback(_key: u64) -> Choice {
        Choice::Fallback
    }

    /// The vendor's point `[7, 0]` from key 16 on, its default launch below.
    fn a_point_from_16(key: u64) -> Option<&'static [u32]> {
        (key >= 16).then_some(&[7, 0])
    }

    fn small_ours_else_fallback(key: u64) -> Choice {
        match key {
            0..=63 => Choice::Variant(1),
            _ => Choice::Fallback,
        }
    }

    const H200: TableOrigin = TableOrigin {
        path: "tuning/nvidia-h200.json",
        gpu: "NVIDIA H200",
        compute_capability: (9, 0),
        sm_count: 132,
    };

    static PLANS: [Plan; 2] = [
        Plan {
            origin: Some(H200),
            shape: &[4096, 4096],
            ranges: &[],
            select: small_ours_else_fallback,
            // Its small-key range did not lead the fallback by enough to be lent.
            borrowed: &[],
            select_borrowed: fallback,
            above: "",
            vendor_point: no_vendor_point,
            vendor_ranges: &[],
        },
        Plan {
            origin: Some(H200),
            shape: &[14336, 4096],
            ranges: &[],
            select: variant_0,
            borrowed: &[],
            select_borrowed: variant_0,
            above: "",
            vendor_point: a_point_from_16,
            vendor_ranges: &[PointRange::new(16, u64::MAX, "cuBLAS@00000007")],
        },
    ];

    /// The plan of a GPU without a table: `select` at every key.
    const fn everywhere(select: fn(u64) -> Choice) -> Plan {
        Plan {
            origin: None,
            shape: &[],
            ranges: &[],
            select,
            borrowed: &[],
            select_borrowed: select,
            above: "",
            vendor_point: no_vendor_point,
            vendor_ranges: &[],
        }
    }

    static BAKED: Baked = Baked {
        kernel: "gemm",
        images: &[],
        plans: &PLANS,
        shape_args: &["n", "k"],
        fallback: "cuBLAS",
        defaults: everywhere(variant_0),
        note: "test",
        not_compiled: None,
    };

    fn h200() -> GpuIdentity {
        GpuIdentity {
            name: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            sm_count: 132,
        }
    }

    #[test]
    fn each_tuned_shape_has_its_plan_and_another_shape_the_nearest() {
        let (plans, selection) = BAKED.plans_for(&h200());
        assert_eq!(plans.len(), 2);
        assert!(matches!(selection, Selection::Tuned { .. }));
        let (plan, exact) = plan_for_shape(&plans, &[4096, 4096]);
        assert!(exact);
        assert_eq!((plan.select)(1), Choice::Variant(1));
        assert_eq!((plan.select)(4096), Choice::Fallback);
        let (plan, exact) = plan_for_shape(&plans, &[14336, 4096]);
        assert!(exact);
        assert_eq!((plan.select)(1), Choice::Variant(0));
        // (12288, 4096) is 0.22 from (14336, 4096) and 1.58 from (4096, 4096).
        let (plan, exact) = plan_for_shape(&plans, &[12288, 4096]);
        assert!(!exact);
        assert_eq!(plan.shape, [14336, 4096]);
        // (5000, 4096) is nearer the first.
        assert_eq!(plan_for_shape(&plans, &[5000, 4096]).0.shape, [4096, 4096]);
    }

    #[test]
    fn a_shape_not_tuned_launches_what_the_nearest_plan_lends() {
        let (plans, _) = BAKED.plans_for(&h200());
        // Its own plan at a tuned shape; the borrowed match elsewhere, which here
        // gives the first plan's small keys to the fallback and keeps the second's.
        assert_eq!(choose_in(&plans, &[4096, 4096], 1), Choice::Variant(1));
        assert_eq!(choose_in(&plans, &[5000, 4096], 1), Choice::Fallback);
        assert_eq!(choose_in(&plans, &[12288, 4096], 1), Choice::Variant(0));
    }

    /// A vendor's point is chosen for one problem: a call at a tuned shape runs its
    /// plan's point, a call at a shape that borrows that plan the default launch.
    #[test]
    fn a_vendor_point_runs_at_its_own_shape_only() {
        let (plans, _) = BAKED.plans_for(&h200());
        assert_eq!(
            vendor_point_in(&plans, &[14336, 4096], 32),
            Some(&[7, 0][..])
        );
        assert_eq!(vendor_point_in(&plans, &[14336, 4096], 1), None);
        assert_eq!(vendor_point_in(&plans, &[12288, 4096], 32), None);
        assert_eq!(vendor_point_in(&plans, &[4096, 4096], 32), None);
    }

    #[test]
    fn another_gpu_gets_the_defaults_for_every_shape() {
        let b200 = GpuIdentity {
            name: "NVIDIA B200".into(),
            compute_capability: (10, 0),
            sm_count: 148,
        };
        let (plans, selection) = BAKED.plans_for(&b200);
        assert!(matches!(selection, Selection::Defaults { .. }));
        let (plan, exact) = plan_for_shape(&plans, &[4096, 4096]);
        assert!(plan.origin.is_none() && !exact);
        assert_eq!((plan.select)(1), Choice::Variant(0));
    }

    #[test]
    fn describe_names_the_vendor_and_each_shape() {
        let text = BAKED.describe("m");
        assert!(text.contains("at n=4096,k=4096"), "{text}");
        assert!(text.contains("at n=14336,k=4096"), "{text}");
        // One header for the GPU, not one per shape.
        assert_eq!(text.matches("on NVIDIA H200").count(), 1, "{text}");
    }

    /// Where the fallback runs one of the vendor's points, the listing names the
    /// point per range (it said `cuBLAS` for all of them, hiding what dispatch
    /// runs), and so does `describe_in` at the plan's own shape.
    #[test]
    fn the_listing_names_the_vendor_s_point_per_range() {
        static RANGES: [Range; 2] = [
            Range::new(0, 63, Choice::Variant(0)),
            Range::new(64, u64::MAX, Choice::Fallback),
        ];
        static PLAN: [Plan; 1] = [Plan::defaults(&RANGES, small_ours_else_fallback)
            .from_table(H200)
            .with_vendor_points(
                a_point_from_16,
                &[
                    PointRange::new(16, 99, "cuBLAS@aaaaaaaa"),
                    PointRange::new(200, 299, "cuBLAS@bbbbbbbb"),
                ],
            )];
        assert_eq!(
            PLAN[0].fallback_pieces(&RANGES[1]),
            [
                (64, 99, Some("cuBLAS@aaaaaaaa")),
                (100, 199, None),
                (200, 299, Some("cuBLAS@bbbbbbbb")),
                (300, u64::MAX, None),
            ]
        );
        let baked = Baked {
            kernel: "gemm",
            images: &[],
            plans: &PLAN,
            shape_args: &[],
            fallback: "cuBLAS",
            defaults: everywhere(fallback),
            note: "test",
            not_compiled: None,
        };
        let text = baked.describe_plans("m");
        for line in [
            "m in 0..=63",
            "m in 64..=99                     cuBLAS@aaaaaaaa",
            "m in 100..=199                   cuBLAS\n",
            "m in 200..=299                   cuBLAS@bbbbbbbb",
            "m >= 300                         cuBLAS\n",
        ] {
            assert!(text.contains(line), "{line:?} in\n{text}");
        }
        assert_eq!(PLAN[0].point_name(64), Some("cuBLAS@aaaaaaaa"));
        assert_eq!(PLAN[0].point_name(150), None);
    }

    #[test]
    fn without_a_table_nothing_is_said_of_another_gpu() {
        assert!(BAKED.describe("m").contains("on any other GPU: "));
        let untuned = Baked {
            kernel: "gemm",
            images: &[],
            plans: &[],
            shape_args: &["n", "k"],
            fallback: "cuBLAS",
            defaults: everywhere(fallback),
            note: "gemm: cuBLAS (its incumbent) at every size: no table has it",
            not_compiled: None,
        };
        let text = untuned.describe("m");
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(!text.contains("other GPU"), "{text}");
    }
}
