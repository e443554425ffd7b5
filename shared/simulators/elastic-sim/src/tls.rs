//! HTTPS for a secured simulated cluster: the node certificate it is
//! started with, served with rustls, and a listener that hands axum only
//! connections whose TLS handshake succeeded.

use crate::config::SimSecurity;
use crate::error::SimError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A client that opens a connection and never finishes its handshake must
/// not hold a task forever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshaken connections waiting for the server to take them.
const BACKLOG: usize = 64;

/// The TLS side of `security`: its certificate chain and key, checked.
pub fn acceptor(security: &SimSecurity) -> Result<TlsAcceptor, SimError> {
    acceptor_for(&security.cert_chain_pem, &security.key_pem)
}

/// Serves `cert_chain_pem` with `key_pem`, checked.
pub fn acceptor_for(
    cert_chain_pem: &str,
    key_pem: &floe_domain::secret::SecretString,
) -> Result<TlsAcceptor, SimError> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert_chain_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| SimError::Tls(format!("the certificate chain is not PEM: {e}")))?;
    if chain.is_empty() {
        return Err(SimError::Tls(
            "the certificate chain holds no certificate".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.expose().as_bytes())
        .map_err(|e| SimError::Tls(format!("the private key is not PEM: {e}")))?;
    // The provider is named rather than taken from the process default, so
    // no other crate's choice (or absence of one) can make this panic.
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| SimError::Tls(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| SimError::Tls(format!("the certificate and key do not fit: {e}")))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Accepts TCP connections and runs each handshake in its own task, so a
/// slow or failing client never stalls the others; axum gets the
/// connections that completed.
pub struct TlsListener {
    addr: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    /// Owns the TCP listener: aborted when this listener is dropped, which
    /// closes the port.
    acceptor: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, tls: TlsAcceptor, addr: SocketAddr) -> TlsListener {
        let (tx, ready) = mpsc::channel(BACKLOG);
        let acceptor = tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors and the like: wait, as
                        // axum's own listener does, rather than spin.
                        tracing::debug!(%error, "simulated cluster could not accept a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let tls = tls.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send((stream, peer)).await;
                        }
                        Ok(Err(error)) => {
                            tracing::debug!(%peer, %error, "TLS handshake with the simulated cluster failed");
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake with the simulated cluster timed out");
                        }
                    }
                });
            }
        });
        TlsListener {
            addr,
            ready,
            acceptor,
        }
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The acceptor task is gone (it only ends when aborted): no
            // connection will ever come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
