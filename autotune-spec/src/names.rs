//! Naming conventions shared by the macro (generated items) and the build side
//! (generated dispatch, tables, files).

/// `rms_norm` -> `RmsNorm`: the dispatch struct generated for a wrapper.
pub fn dispatch_struct(fn_name: &str) -> String {
    fn_name
        .split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
                None => String::new(),
            }
        })
        .collect()
}

/// `block` -> `BLOCK`: the preprocessor macro a parameter becomes (`-DBLOCK=128`).
pub fn define(param: &str) -> String {
    param.to_ascii_uppercase()
}

/// `block=128,stages=2`: how a point is named in tables, logs and dispatch.
pub fn point_name(params: &[impl AsRef<str>], values: &[u32]) -> String {
    if params.is_empty() {
        return "default".to_string();
    }
    params
        .iter()
        .zip(values)
        .map(|(name, value)| format!("{}={value}", name.as_ref()))
        .collect::<Vec<_>>()
        .join(",")
}

/// `block128_stages2`: a point as a file-name and identifier fragment.
pub fn point_slug(params: &[impl AsRef<str>], values: &[u32]) -> String {
    if params.is_empty() {
        return "default".to_string();
    }
    params
        .iter()
        .zip(values)
        .map(|(name, value)| format!("{}{value}", name.as_ref()))
        .collect::<Vec<_>>()
        .join("_")
}

/// `NVIDIA H200` -> `nvidia-h200`: the file stem of a GPU model's tuning table.
pub fn gpu_slug(gpu_name: &str) -> String {
    let mut slug = String::new();
    for c in gpu_name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    slug.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(dispatch_struct("rms_norm"), "RmsNorm");
        assert_eq!(dispatch_struct("topk_indexer_v2"), "TopkIndexerV2");
        assert_eq!(define("block_m"), "BLOCK_M");
        let params = ["block".to_string(), "stages".to_string()];
        assert_eq!(point_name(&params, &[64, 2]), "block=64,stages=2");
        assert_eq!(point_slug(&params, &[64, 2]), "block64_stages2");
        let none: [&str; 0] = [];
        assert_eq!(point_name(&none, &[]), "default");
        assert_eq!(gpu_slug("NVIDIA H200"), "nvidia-h200");
        assert_eq!(
            gpu_slug("NVIDIA GeForce RTX 4090 (laptop)"),
            "nvidia-geforce-rtx-4090-laptop"
        );
    }
}
