//! The `where` constraint between parameters: parsed from a Rust expression,
//! evaluated on every point.

use std::fmt;

use quote::ToTokens;
use syn::{BinOp, Expr, Lit, UnOp};

/// A constraint between parameters (`where = "block * stages <= 1024"`), compiled from
/// a Rust expression over parameter names, integer literals, arithmetic, comparisons
/// and `&&`/`||`/`!`. Points for which it is false are not part of the space.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    text: String,
    node: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Int(i64),
    Bool(bool),
    Param(usize),
    Not(Box<Node>),
    Neg(Box<Node>),
    Binary(Op, Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Value {
    Int(i64),
    Bool(bool),
}

/// Why a constraint could not be evaluated at one point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalError {
    Overflow,
    DivisionByZero,
    /// An operator was applied to the wrong kind of value (`1 && 2`, `!5`, ...).
    Type(&'static str),
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Overflow => f.write_str("arithmetic overflow"),
            Self::DivisionByZero => f.write_str("division by zero"),
            Self::Type(what) => f.write_str(what),
        }
    }
}

impl Constraint {
    /// Compiles `expr`, resolving names against `params` (in declaration order).
    pub fn compile(expr: &Expr, params: &[String]) -> syn::Result<Self> {
        let node = compile(expr, params)?;
        let text = expr.to_token_stream().to_string();
        Ok(Self { text, node })
    }

    /// The expression as written (token-normalised).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Evaluates at a point given as parameter values in declaration order.
    pub fn eval(&self, values: &[u32]) -> Result<bool, EvalError> {
        match eval(&self.node, values)? {
            Value::Bool(keep) => Ok(keep),
            Value::Int(_) => Err(EvalError::Type(
                "the constraint is an integer, not a condition (did you mean `x <= n`?)",
            )),
        }
    }
}

fn compile(expr: &Expr, params: &[String]) -> syn::Result<Node> {
    match expr {
        Expr::Paren(inner) => compile(&inner.expr, params),
        Expr::Group(inner) => compile(&inner.expr, params),
        Expr::Lit(lit) => match &lit.lit {
            Lit::Int(int) if int.suffix().is_empty() => Ok(Node::Int(int.base10_parse()?)),
            Lit::Bool(b) => Ok(Node::Bool(b.value)),
            _ => Err(syn::Error::new_spanned(
                lit,
                "only integer and boolean literals can appear in a constraint",
            )),
        },
        Expr::Path(path) => {
            let Some(ident) = path.path.get_ident() else {
                return Err(syn::Error::new_spanned(
                    path,
                    "a constraint can only name parameters of this kernel",
                ));
            };
            let name = ident.to_string();
            match params.iter().position(|p| *p == name) {
                Some(index) => Ok(Node::Param(index)),
                None => Err(syn::Error::new_spanned(
                    ident,
                    format!(
                        "`{name}` is not a parameter of this kernel (parameters: {})",
                        params.join(", ")
                    ),
                )),
            }
        }
        Expr::Unary(unary) => {
            let operand = Box::new(compile(&unary.expr, params)?);
            match unary.op {
                UnOp::Not(_) => Ok(Node::Not(operand)),
                UnOp::Neg(_) => Ok(Node::Neg(operand)),
                _ => Err(syn::Error::new_spanned(
                    unary,
                    "unsupported operator in a constraint",
                )),
            }
        }
        Expr::Binary(binary) => {
            let op = match binary.op {
                BinOp::Add(_) => Op::Add,
                BinOp::Sub(_) => Op::Sub,
                BinOp::Mul(_) => Op::Mul,
                BinOp::Div(_) => Op::Div,
                BinOp::Rem(_) => Op::Rem,
                BinOp::Eq(_) => Op::Eq,
                BinOp::Ne(_) => Op::Ne,
                BinOp::Lt(_) => Op::Lt,
                BinOp::Le(_) => Op::Le,
                BinOp::Gt(_) => Op::Gt,
                BinOp::Ge(_) => Op::Ge,
                BinOp::And(_) => Op::And,
                BinOp::Or(_) => Op::Or,
                _ => {
                    return Err(syn::Error::new_spanned(
                        binary.op,
                        "unsupported operator in a constraint \
                         (use + - * / % == != < <= > >= && || !)",
                    ));
                }
            };
            Ok(Node::Binary(
                op,
                Box::new(compile(&binary.left, params)?),
                Box::new(compile(&binary.right, params)?),
            ))
        }
        other => Err(syn::Error::new_spanned(
            other,
            "unsupported expression in a constraint: use parameter names, integers, \
             arithmetic, comparisons, `&&`, `||` and `!`",
        )),
    }
}

fn eval(node: &Node, values: &[u32]) -> Result<Value, EvalError> {
    Ok(match node {
        Node::Int(v) => Value::Int(*v),
        Node::Bool(b) => Value::Bool(*b),
        Node::Param(index) => Value::Int(i64::from(values[*index])),
        Node::Not(inner) => Value::Bool(!as_bool(eval(inner, values)?, "`!` needs a condition")?),
        Node::Neg(inner) => Value::Int(
            as_int(eval(inner, values)?, "`-` needs an integer")?
                .checked_neg()
                .ok_or(EvalError::Overflow)?,
        ),
        Node::Binary(Op::And, left, right) => Value::Bool(
            as_bool(eval(left, values)?, "`&&` needs conditions")?
                && as_bool(eval(right, values)?, "`&&` needs conditions")?,
        ),
        Node::Binary(Op::Or, left, right) => Value::Bool(
            as_bool(eval(left, values)?, "`||` needs conditions")?
                || as_bool(eval(right, values)?, "`||` needs conditions")?,
        ),
        Node::Binary(op, left, right) => {
            let (l, r) = (eval(left, values)?, eval(right, values)?);
            match (op, l, r) {
                (Op::Eq, l, r) => Value::Bool(l == r),
                (Op::Ne, l, r) => Value::Bool(l != r),
                (op, Value::Int(l), Value::Int(r)) => arithmetic(*op, l, r)?,
                _ => return Err(EvalError::Type("arithmetic and ordering need integers")),
            }
        }
    })
}

fn arithmetic(op: Op, l: i64, r: i64) -> Result<Value, EvalError> {
    let int = |v: Option<i64>| v.map(Value::Int).ok_or(EvalError::Overflow);
    match op {
        Op::Add => int(l.checked_add(r)),
        Op::Sub => int(l.checked_sub(r)),
        Op::Mul => int(l.checked_mul(r)),
        Op::Div | Op::Rem if r == 0 => Err(EvalError::DivisionByZero),
        Op::Div => int(l.checked_div(r)),
        Op::Rem => int(l.checked_rem(r)),
        Op::Lt => Ok(Value::Bool(l < r)),
        Op::Le => Ok(Value::Bool(l <= r)),
        Op::Gt => Ok(Value::Bool(l > r)),
        Op::Ge => Ok(Value::Bool(l >= r)),
        Op::Eq | Op::Ne | Op::And | Op::Or => unreachable!("handled by the caller"),
    }
}

fn as_bool(value: Value, what: &'static str) -> Result<bool, EvalError> {
    match value {
        Value::Bool(b) => Ok(b),
        Value::Int(_) => Err(EvalError::Type(what)),
    }
}

fn as_int(value: Value, what: &'static str) -> Result<i64, EvalError> {
    match value {
        Value::Int(v) => Ok(v),
        Value::Bool(_) => Err(EvalError::Type(what)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn constraint(text: &str) -> syn::Result<Constraint> {
        let params = ["block".to_string(), "stages".to_string()];
        Constraint::compile(&syn::parse_str(text)?, &params)
    }

    #[test]
    fn evaluates_arithmetic_and_logic() {
        let c = constraint("block * stages <= 512 && !(stages == 3) || block % 64 != 0").unwrap();
        assert!(c.eval(&[128, 2]).unwrap());
        assert!(!c.eval(&[256, 4]).unwrap());
        assert!(!c.eval(&[128, 3]).unwrap());
        assert!(c.eval(&[100, 3]).unwrap());
    }

    #[test]
    fn unknown_names_and_calls_are_rejected() {
        let error = constraint("blok < 4").unwrap_err().to_string();
        assert!(error.contains("`blok` is not a parameter"), "{error}");
        assert!(constraint("f(block)").is_err());
        assert!(constraint("block << 2 > 1").is_err());
    }

    #[test]
    fn evaluation_errors_are_reported() {
        assert_eq!(
            constraint("block / (stages - 2) > 0")
                .unwrap()
                .eval(&[64, 2]),
            Err(EvalError::DivisionByZero)
        );
        assert!(matches!(
            constraint("block + 1").unwrap().eval(&[64, 2]),
            Err(EvalError::Type(_))
        ));
        assert!(matches!(
            constraint("block && true").unwrap().eval(&[64, 2]),
            Err(EvalError::Type(_))
        ));
    }
}
