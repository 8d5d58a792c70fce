//! Parameters, their values and the points of a space (the constraint applied).

use std::fmt;

use crate::constraint::{Constraint, EvalError};

/// One tunable parameter: its name (a field of the params struct, `-DNAME=value` for
/// nvcc) and the values it takes, in declaration order.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub values: Vec<u32>,
}

/// The parameter a kernel with candidate sources gains: which source a point is
/// compiled from (0, the first listed, is the incumbent).
pub const SOURCE_PARAM: &str = "source";

/// The values of every parameter of a kernel, in declaration order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point(pub Vec<u32>);

/// The cartesian product of the parameters, less the points a constraint rejects.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    pub params: Vec<Param>,
    pub constraint: Option<Constraint>,
}

impl Space {
    pub fn names(&self) -> Vec<String> {
        self.params.iter().map(|p| p.name.clone()).collect()
    }

    /// Every point of the product, the last parameter varying fastest, with the
    /// constraint's verdict for each.
    pub fn product(&self) -> Vec<(Point, Result<bool, EvalError>)> {
        let mut points = vec![Vec::new()];
        for param in &self.params {
            points = points
                .into_iter()
                .flat_map(|prefix| {
                    param.values.iter().map(move |&value| {
                        let mut point = prefix.clone();
                        point.push(value);
                        point
                    })
                })
                .collect();
        }
        points
            .into_iter()
            .map(|values| {
                let verdict = match &self.constraint {
                    Some(constraint) => constraint.eval(&values),
                    None => Ok(true),
                };
                (Point(values), verdict)
            })
            .collect()
    }

    /// The points of the space (the constraint holds), in enumeration order.
    pub fn points(&self) -> Vec<Point> {
        self.product()
            .into_iter()
            .filter_map(|(point, verdict)| matches!(verdict, Ok(true)).then_some(point))
            .collect()
    }

    pub fn contains(&self, point: &Point) -> bool {
        point.0.len() == self.params.len()
            && self
                .params
                .iter()
                .zip(&point.0)
                .all(|(param, value)| param.values.contains(value))
            && self
                .constraint
                .as_ref()
                .is_none_or(|c| matches!(c.eval(&point.0), Ok(true)))
    }

    /// `block=256,stages=2`, the name of a point in tables, logs and dispatch.
    pub fn point_name(&self, point: &Point) -> String {
        crate::names::point_name(&self.names(), &point.0)
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values: Vec<String> = self.0.iter().map(u32::to_string).collect();
        write!(f, "({})", values.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(constraint: Option<&str>) -> Space {
        let names = ["block".to_string(), "stages".to_string()];
        Space {
            params: vec![
                Param {
                    name: "block".into(),
                    values: vec![64, 128, 256],
                },
                Param {
                    name: "stages".into(),
                    values: vec![1, 2, 3],
                },
            ],
            constraint: constraint
                .map(|text| Constraint::compile(&syn::parse_str(text).unwrap(), &names).unwrap()),
        }
    }

    #[test]
    fn enumerates_the_product_last_parameter_fastest() {
        let points = space(None).points();
        assert_eq!(points.len(), 9);
        assert_eq!(points[0], Point(vec![64, 1]));
        assert_eq!(points[1], Point(vec![64, 2]));
        assert_eq!(points[8], Point(vec![256, 3]));
    }

    #[test]
    fn constraint_prunes_points() {
        let s = space(Some("block * stages <= 256"));
        assert_eq!(s.points().len(), 6);
        assert!(s.contains(&Point(vec![128, 2])));
        assert!(!s.contains(&Point(vec![256, 2])));
        assert!(!s.contains(&Point(vec![96, 1])));
        assert_eq!(s.point_name(&Point(vec![128, 2])), "block=128,stages=2");
    }
}
