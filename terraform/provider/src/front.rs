//! The plugin's TLS front.
//!
//! Terraform starts a provider with `PLUGIN_CLIENT_CERT` (go-plugin's
//! AutoMTLS): the provider must serve gRPC over TLS, present a certificate
//! it names in its handshake line, and accept only Terraform's client
//! certificate. `tf-provider` does this through a standard WebPKI client
//! verifier, which refuses Terraform's certificate: go-plugin makes a
//! self-signed one marked as a CA (with a P-521 key), and WebPKI never
//! accepts a CA certificate as a client's. The handshake fails and
//! Terraform reports "tls: unknown certificate".
//!
//! So the provider runs in two processes. This one, the front, holds the
//! TLS: it accepts exactly the certificate Terraform gave (byte for byte,
//! its handshake signatures checked), and forwards each connection's bytes
//! to the inner provider, a child serving plaintext gRPC on loopback that
//! Terraform never sees. The child ends when the front does (its stdin is
//! the front's pipe); the front ends with the child (Terraform's shutdown
//! call reaches it through the front).

use base64::Engine;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// Set on the inner provider: serve plaintext gRPC, and end with stdin.
pub const INNER: &str = "FLOE_TF_PROVIDER_INNER";

/// Accepts one client certificate, the one Terraform handed over.
#[derive(Debug)]
struct Pinned {
    certificate: CertificateDer<'static>,
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for Pinned {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.certificate.as_ref() {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The front's certificate: self-signed for `localhost`, the name go-plugin
/// checks, and trusted by Terraform because the handshake line carries it.
fn server_identity() -> anyhow::Result<(CertificateDer<'static>, PrivateKeyDer<'static>)> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()])?;
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
        rcgen::KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = params.self_signed(&key)?;
    Ok((
        cert.der().clone(),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    ))
}

/// Runs the front for Terraform's `client_cert_pem`; returns the inner
/// provider's exit code.
pub async fn run(client_cert_pem: &str) -> anyhow::Result<i32> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let certificate = CertificateDer::from_pem_slice(client_cert_pem.as_bytes())
        .map_err(|e| anyhow::anyhow!("PLUGIN_CLIENT_CERT is no PEM certificate: {e}"))?;
    let (cert, key) = server_identity()?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(Arc::new(Pinned {
            certificate,
            provider,
        }))
        .with_single_cert(vec![cert.clone()], key)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));

    let exe = std::env::current_exe()?;
    let mut inner = tokio::process::Command::new(exe)
        .env_remove("PLUGIN_CLIENT_CERT")
        .env(INNER, "1")
        // tf-provider appends a backtrace to every diagnostic when
        // backtraces are on (a shell's RUST_BACKTRACE=1): Terraform would
        // show it under each error. Panics keep theirs (RUST_BACKTRACE).
        .env("RUST_LIB_BACKTRACE", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    // Held until the front ends: the inner provider's stdin, whose end is
    // its signal to end. (`wait` would close it if `inner` still held it.)
    let _lifeline = inner.stdin.take();
    let stdout = inner
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("the inner provider has no stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    // go-plugin's line: CORE|APP|tcp|ADDRESS|grpc|[CERT]
    let handshake = lines
        .next_line()
        .await?
        .ok_or_else(|| anyhow::anyhow!("the inner provider ended before its handshake"))?;
    let parts: Vec<&str> = handshake.trim().split('|').collect();
    let (Some(core), Some(app), Some(address)) = (parts.first(), parts.get(1), parts.get(3)) else {
        anyhow::bail!("the inner provider's handshake is not go-plugin's: {handshake}");
    };
    let inner_address = address.to_string();

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let line = format!(
        "{core}|{app}|tcp|{}|grpc|{}\n",
        listener.local_addr()?,
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(cert.as_ref())
    );
    let mut out = tokio::io::stdout();
    out.write_all(line.as_bytes()).await?;
    out.flush().await?;

    loop {
        tokio::select! {
            status = inner.wait() => return Ok(status?.code().unwrap_or(1)),
            accepted = listener.accept() => {
                let Ok((socket, _)) = accepted else { continue };
                let acceptor = acceptor.clone();
                let target = inner_address.clone();
                tokio::spawn(async move {
                    let mut tls = match acceptor.accept(socket).await {
                        Ok(t) => t,
                        Err(e) => {
                            crate::log::warn(format!("plugin TLS: a connection was refused: {e}"));
                            return;
                        }
                    };
                    let mut plain = match TcpStream::connect(&target).await {
                        Ok(p) => p,
                        Err(e) => {
                            crate::log::warn(format!("plugin TLS: the inner provider is unreachable: {e}"));
                            return;
                        }
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        }
    }
}

/// In the inner provider: end when the front's pipe closes (the front was
/// killed), so that no provider outlives the Terraform run.
pub fn end_with_front() {
    tokio::spawn(async {
        let mut stdin = tokio::io::stdin();
        let mut sink = tokio::io::sink();
        let _ = tokio::io::copy(&mut stdin, &mut sink).await;
        std::process::exit(0);
    });
}
