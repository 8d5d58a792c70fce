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
    /// One plan per tuning table whose fingerprint matched at build time.
    pub plans: &'static [Plan],
    /// The plan for any other GPU: the declared default everywhere.
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
    pub ranges: &'static [Range],
    /// The ranges as a `match` (generated from the same data).
    pub select: fn(u64) -> Choice,
    /// Which keys were measured and what the keys above them get
    /// (`measured up to m=16384 ...; above it, the pick there (extrapolated)`);
    /// empty for the defaults plan.
    pub above: &'static str,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub first: u64,
    pub last: u64,
    pub choice: Choice,
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
}

impl Baked {
    /// The plan for `gpu`: its table's if one matched at build time and was measured
    /// on the same model, else the defaults (with the reason).
    pub fn plan_for(&'static self, gpu: &GpuIdentity) -> (&'static Plan, Selection) {
        let matching = self.plans.iter().find(|plan| {
            plan.origin.as_ref().is_some_and(|o| {
                o.gpu == gpu.name
                    && o.compute_capability == gpu.compute_capability
                    && o.sm_count == gpu.sm_count
            })
        });
        if let Some(plan) = matching
            && let Some(origin) = &plan.origin
        {
            return (
                plan,
                Selection::Tuned {
                    table: origin.path,
                    gpu: gpu.clone(),
                    above: plan.above,
                },
            );
        }
        let reason = if self.plans.is_empty() {
            self.note.to_string()
        } else {
            let tuned: Vec<String> = self
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
            format!(
                "no tuning table for this GPU; tables baked for: {}",
                tuned.join(", ")
            )
        };
        (
            &self.defaults,
            Selection::Defaults {
                gpu: gpu.clone(),
                reason,
            },
        )
    }
}

/// A kernel's baked variants loaded on one device, with the plan for that device.
#[derive(Debug)]
pub struct Loaded<P> {
    variants: Vec<Variant<P>>,
    plan: &'static Plan,
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
        let (plan, selection) = baked.plan_for(&gpu);
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
            plan,
            selection,
            default,
        })
    }

    /// What to launch for `key`: one `match`.
    #[inline]
    pub fn choose(&self, key: u64) -> Choice {
        (self.plan.select)(key)
    }

    /// The variant at `index` of the baked images.
    #[inline]
    pub fn variant(&self, index: usize) -> &Variant<P> {
        &self.variants[index]
    }

    /// The declared default variant.
    #[inline]
    pub fn default_variant(&self) -> &Variant<P> {
        &self.variants[self.default]
    }

    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// The ranges of the plan in use.
    pub fn ranges(&self) -> &'static [Range] {
        self.plan.ranges
    }

    /// The name of what `key` dispatches to (`block=128,stages=2` or `fallback`).
    pub fn describe(&self, key: u64) -> &str {
        match self.choose(key) {
            Choice::Variant(index) => self.variants[index].name(),
            Choice::Fallback => "fallback",
        }
    }
}

impl Baked {
    /// What dispatch launches per range, per plan, as readable lines: for examples,
    /// logs and machines without a GPU.
    pub fn describe(&self, key: &str) -> String {
        let mut out = format!("{}\n", self.note);
        let name = |choice: Choice| match choice {
            Choice::Variant(index) => self.images.get(index).map_or("?", |i| i.name).to_string(),
            Choice::Fallback => "fallback".to_string(),
        };
        for plan in self.plans {
            if let Some(origin) = &plan.origin {
                out.push_str(&format!(
                    "  on {} (sm_{}{}, {} SMs), from {}:\n",
                    origin.gpu,
                    origin.compute_capability.0,
                    origin.compute_capability.1,
                    origin.sm_count,
                    origin.path
                ));
            }
            for range in plan.ranges {
                let span = if range.last == u64::MAX {
                    format!("{key} >= {}", range.first)
                } else {
                    format!("{key} in {}..={}", range.first, range.last)
                };
                out.push_str(&format!("    {span:<32} {}\n", name(range.choice)));
            }
            if !plan.above.is_empty() {
                out.push_str(&format!("    ({})\n", plan.above));
            }
        }
        out.push_str(&format!(
            "  on any other GPU: {} for every {key}\n",
            name((self.defaults.select)(0))
        ));
        if let Some(reason) = self.not_compiled {
            out.push_str(&format!("  not compiled: {reason}\n"));
        }
        out
    }
}
