/// `--flag value` options and positional arguments, in order.
#[derive(Debug)]
pub struct Args {
    options: Vec<(String, String)>,
    positional: Vec<String>,
}

impl Args {
    pub fn new(argv: &[String]) -> Self {
        let mut options = Vec::new();
        let mut positional = Vec::new();
        let mut rest = argv.iter();
        while let Some(arg) = rest.next() {
            if arg.starts_with("--") {
                options.push((arg.clone(), rest.next().cloned().unwrap_or_default()));
            } else {
                positional.push(arg.clone());
            }
        }
        Self {
            options,
            positional,
        }
    }

    pub fn value(&self, flag: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(f, _)| f == flag)
            .map(|(_, v)| v.as_str())
    }

    pub fn required(&self, flag: &str) -> Result<&str, String> {
        self.value(flag)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("{flag} is required"))
    }

    pub fn number(&self, flag: &str) -> Result<Option<usize>, String> {
        self.value(flag)
            .map(|v| {
                v.parse()
                    .map_err(|_| format!("{flag} takes a number, not `{v}`"))
            })
            .transpose()
    }

    pub fn positional(&self) -> &[String] {
        &self.positional
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_positionals() {
        let argv: Vec<String> = ["out.json", "--budget", "12", "a.json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let args = Args::new(&argv);
        assert_eq!(args.number("--budget").unwrap(), Some(12));
        assert_eq!(args.positional(), ["out.json", "a.json"]);
        assert!(args.required("--kernel").is_err());
    }
}
