//! TLS through rustls (ring provider), with libpq's `sslmode` semantics:
//! `prefer` and `require` encrypt without checking the certificate (as libpq
//! does: they guard against eavesdropping, not against impersonation);
//! `verify-ca` checks the chain against the trusted roots; `verify-full`
//! checks the chain and the host name. The trusted roots are the PEM file
//! named by `sslrootcert` / `PGSSLROOTCERT`, else `~/.postgresql/root.crt`
//! when it exists, else the Mozilla roots of `webpki-roots`.

use super::config::SslMode;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The connector for `mode`. Fails when a named root certificate file cannot be read.
pub(crate) fn connector(mode: SslMode, root_cert: Option<&Path>) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(|e| format!("TLS set-up: {e}"))?;
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        SslMode::Disable | SslMode::Prefer | SslMode::Require => Arc::new(EncryptOnly { algs: provider.signature_verification_algorithms }),
        SslMode::VerifyCa | SslMode::VerifyFull => {
            let roots = roots(root_cert)?;
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build().map_err(|e| format!("TLS set-up: {e}"))?;
            if mode == SslMode::VerifyCa { Arc::new(AnyName(webpki)) } else { webpki }
        }
    };
    let config = builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn roots(named: Option<&Path>) -> Result<RootCertStore, String> {
    let default_file = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".postgresql/root.crt")).filter(|p| p.is_file());
    let Some(file) = named.map(Path::to_path_buf).or(default_file) else {
        return Ok(RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() });
    };
    let mut store = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(&file).map_err(|e| format!("root certificate {}: {e}", file.display()))?;
    for c in certs {
        let c = c.map_err(|e| format!("root certificate {}: {e}", file.display()))?;
        store.add(c).map_err(|e| format!("root certificate {}: {e}", file.display()))?;
    }
    if store.is_empty() {
        return Err(format!("root certificate {}: no certificate in the file", file.display()));
    }
    Ok(store)
}

/// `prefer`/`require`: any certificate, but the handshake must still be
/// signed by the key of the certificate presented.
#[derive(Debug)]
struct EncryptOnly {
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// `verify-ca`: the full webpki check, except that the certificate need not name the host.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
