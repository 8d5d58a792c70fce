//! How a kernel finds its inputs when it is called, which is how the sweep times
//! it: `inputs = cold | warm`.

/// The condition the sweep times a kernel's launches in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Inputs {
    /// The default: every call reads its inputs from HBM, with L2 holding clean,
    /// unrelated lines, as a layer of a model finds its weights. The sweep times
    /// each launch on the next of enough copies of the case's rotating buffers
    /// (`Case::rotating`) to exceed the L2 several times over; a case that names
    /// none is timed after the L2 flush (`AUTOTUNE_FLUSH`).
    Cold,
    /// The inputs were just written or read (an activation the kernel before
    /// produced): each launch is timed on the same buffers, nothing evicted.
    Warm,
}

impl Inputs {
    /// Every condition's name, as the attribute spells it.
    pub const NAMES: [&'static str; 2] = ["cold", "warm"];

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "cold" => Some(Self::Cold),
            "warm" => Some(Self::Warm),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Cold => "cold",
            Self::Warm => "warm",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in Inputs::NAMES {
            assert_eq!(Inputs::parse(name).map(Inputs::name), Some(name));
        }
        assert_eq!(Inputs::parse("Cold"), None);
    }
}
