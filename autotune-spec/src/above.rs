//! What dispatch does with keys above the largest declared size, where the sweep
//! timed nothing unless told to look: `above = measure | extend | incumbent`.

/// The rule for keys above the largest declared size (the top).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Above {
    /// The default: the sweep also times the top's pick and the incumbent at twice
    /// the top (memory and the key's type permitting). Where the pick still wins
    /// there, it owns every larger key (extrapolated above twice the top); else the
    /// incumbent does, from a boundary refined between the two.
    Measure,
    /// The top's pick owns every larger key, unmeasured: the user states it scales.
    Extend,
    /// The incumbent (the fallback, else the default) owns every key above the top,
    /// unmeasured.
    Incumbent,
}

impl Above {
    /// Every rule's name, as the attribute spells it.
    pub const NAMES: [&'static str; 3] = ["measure", "extend", "incumbent"];

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "measure" => Some(Self::Measure),
            "extend" => Some(Self::Extend),
            "incumbent" => Some(Self::Incumbent),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Measure => "measure",
            Self::Extend => "extend",
            Self::Incumbent => "incumbent",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in Above::NAMES {
            assert_eq!(Above::parse(name).map(Above::name), Some(name));
        }
        assert_eq!(Above::parse("Measure"), None);
    }
}
