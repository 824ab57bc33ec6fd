//! Which certificate authorities the upstream client trusts, as the
//! user's machine trusts them: the Mozilla roots compiled in (webpki), the
//! platform's store (Debian's `/etc/ssl/certs` after
//! `update-ca-certificates`), or in its place `SSL_CERT_FILE` and
//! `SSL_CERT_DIR` as OpenSSL reads them, and each `--upstream-ca` file
//! (`lam run` adds `NODE_EXTRA_CA_CERTS`). Loaded once per client; a
//! platform store that is missing or partly unreadable is no error (the
//! other sources stand), an `--upstream-ca` file that gives no
//! certificate is one.

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{CertificateError, ClientConfig, RootCertStore};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a `502` for an upstream whose certificate no trusted CA signed says to do.
pub(crate) const UNKNOWN_ISSUER_HELP: &str = "no CA lam trusts signed the upstream's certificate (a TLS-inspecting proxy, or a gateway on an internal CA?). \
lam trusts the Mozilla roots, the system's store (update-ca-certificates), SSL_CERT_FILE and SSL_CERT_DIR, and each --upstream-ca FILE \
(lam run also NODE_EXTRA_CA_CERTS): give that CA's certificate (PEM) with --upstream-ca FILE, or add it to the system's store, or point SSL_CERT_FILE at a bundle that holds it";

/// The TLS settings for the upstream (and an `https://` proxy): ring,
/// TLS 1.2 and 1.3, the roots of [`roots`]. ALPN is left to the connector.
pub(crate) fn client_config(extra: &[PathBuf]) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions().map_err(|e| format!("TLS: {e}"))?;
    Ok(builder.with_root_certificates(roots(extra)?).with_no_client_auth())
}

/// The webpki roots, the platform's (or `SSL_CERT_FILE`/`SSL_CERT_DIR`'s),
/// and every certificate of each file of `extra`.
fn roots(extra: &[PathBuf]) -> Result<RootCertStore, String> {
    let mut store = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    // Errors are files of the store that did not read: the rest still counts.
    let _ = store.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    for path in extra {
        store.roots.extend(ca_file(path).map_err(|e| format!("--upstream-ca {e}"))?.roots);
    }
    Ok(store)
}

/// The certificates of the PEM file `path` as trust anchors; an error
/// (`PATH: why`) when it cannot be read, holds none, or holds one that is
/// no certificate a CA could have.
fn ca_file(path: &Path) -> Result<RootCertStore, String> {
    let bad = |why: &dyn std::fmt::Display| format!("{}: {why}", path.display());
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))? {
        store.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
    }
    if store.is_empty() {
        return Err(bad(&"no certificate in it (expected PEM: -----BEGIN CERTIFICATE-----)"));
    }
    Ok(store)
}

/// The number of CA certificates in the PEM file `path`, read as
/// `--upstream-ca` reads it: an error (`PATH: why`) when it cannot be read
/// or gives none (`lam run` checks `NODE_EXTRA_CA_CERTS` with it).
pub fn read_upstream_ca(path: &Path) -> Result<usize, crate::error::Error> {
    ca_file(path).map(|c| c.len()).map_err(crate::error::Error::Setting)
}

/// Whether `e` is a certificate no trusted CA signed.
pub(crate) fn unknown_issuer(e: &rustls::Error) -> bool {
    matches!(e, rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upstream_ca_file_must_hold_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let e = client_config(std::slice::from_ref(&missing)).unwrap_err();
        assert!(e.starts_with(&format!("--upstream-ca {}: ", missing.display())), "{e}");
        assert!(read_upstream_ca(&missing).unwrap_err().to_string().starts_with(&format!("{}: ", missing.display())));
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = client_config(std::slice::from_ref(&empty)).unwrap_err();
        assert!(e.contains("no certificate in it"), "{e}");
        let ca =
            rcgen::CertifiedIssuer::self_signed(rcgen::CertificateParams::new(Vec::<String>::new()).unwrap(), rcgen::KeyPair::generate().unwrap()).unwrap();
        let good = dir.path().join("ca.pem");
        std::fs::write(&good, ca.pem()).unwrap();
        assert_eq!(ca_file(&good).unwrap().len(), 1);
        assert!(client_config(&[good]).is_ok());
    }
}
