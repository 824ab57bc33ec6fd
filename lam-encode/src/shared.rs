//! [`MemEmbeddings`]: an [`EmbeddingStore`] in this process's memory, the
//! reference the shared stores (arc-store's PostgreSQL one) are held to.

use lam_core::{EmbeddingStore, Error};
use std::collections::HashMap;

/// Embeddings kept in memory, by model and key.
#[derive(Debug, Default, Clone)]
pub struct MemEmbeddings {
    rows: HashMap<(String, u128), Box<[f32]>>,
}

impl MemEmbeddings {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl EmbeddingStore for MemEmbeddings {
    fn get(&mut self, model: &str, dim: usize, keys: &[u128]) -> Result<Vec<Option<Vec<f32>>>, Error> {
        let row = |k: &u128| self.rows.get(&(model.to_string(), *k)).filter(|v| v.len() == dim).map(|v| v.to_vec());
        Ok(keys.iter().map(row).collect())
    }

    fn put(&mut self, model: &str, dim: usize, keys: &[u128], vectors: &[f32]) -> Result<(), Error> {
        if vectors.len() != keys.len() * dim {
            return Err(Error::Dimension { expected: keys.len() * dim, got: vectors.len() });
        }
        for (k, v) in keys.iter().zip(vectors.chunks_exact(dim.max(1))) {
            self.rows.entry((model.to_string(), *k)).or_insert_with(|| v.into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conformance() {
        lam_core::testsuite::embedding_store(&mut MemEmbeddings::new());
    }
}
