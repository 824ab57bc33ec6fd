//! The arithmetic of a GPU forward pass, named in every build (the CUDA
//! encoder itself needs the `cuda` feature).

/// Arithmetic of the GPU forward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Precision {
    /// fp32 everywhere, TF32 off.
    F32,
    /// bfloat16 GEMM inputs, fp32 accumulation and residual stream.
    Bf16,
    /// IEEE half GEMM inputs, fp32 accumulation and residual stream.
    F16,
}

impl Precision {
    /// `f32`, `bf16` or `f16`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" | "fp32" => Ok(Precision::F32),
            "bf16" => Ok(Precision::Bf16),
            "f16" | "fp16" => Ok(Precision::F16),
            other => Err(format!("precision `{other}`: expected f32, bf16 or f16")),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
