//! The cryptography every TLS connection of the node uses: rustls's ring provider, TLS 1.3 only.
//!
//! Under the simulator (`--cfg madsim`) it is the same provider — the same cipher suites, the
//! same signature verification, the same key loading — with the two things that draw
//! randomness replaced so that a run follows from its seed alone:
//!
//! - `secure_random` (the hello randoms, and anything else rustls draws itself) comes from
//!   madsim's seeded generator;
//! - X25519 key agreement (`SeededX25519`) takes its ephemeral secret from that generator too:
//!   ring's own draws from the OS, through a `SecureRandom` trait ring seals, so it cannot be
//!   given another source. x25519-dalek computes the same function (RFC 7748) from a secret we
//!   hand it.
//!
//! Signing stays ring's: Ed25519 signatures are deterministic (RFC 8032), but ring's ECDSA
//! draws a nonce from the OS, so under the simulator a key of any other kind is refused when it
//! is loaded (`SeededKeys`) — the simulator issues Ed25519 certificates.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// The provider real nodes use: ring, its default suites and groups.
#[cfg(not(madsim))]
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The provider simulated nodes use: ring's, its randomness drawn from the run's seed.
#[cfg(madsim)]
pub fn provider() -> Arc<CryptoProvider> {
    let ring = rustls::crypto::ring::default_provider();
    Arc::new(CryptoProvider {
        kx_groups: vec![&seeded::SeededX25519],
        secure_random: &seeded::SeededRandom,
        key_provider: &seeded::SeededKeys,
        ..ring
    })
}

#[cfg(madsim)]
mod seeded {
    use std::sync::Arc;

    use rustls::crypto::{
        ActiveKeyExchange, GetRandomFailed, KeyProvider, SecureRandom, SharedSecret, SupportedKxGroup,
    };
    use rustls::pki_types::PrivateKeyDer;
    use rustls::sign::SigningKey;
    use rustls::{Error, NamedGroup, PeerMisbehaved, SignatureAlgorithm};

    /// Bytes from madsim's generator, seeded by the run.
    fn fill(buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let word = madsim::rand::random::<u64>().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }

    #[derive(Debug)]
    pub struct SeededRandom;

    impl SecureRandom for SeededRandom {
        fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
            fill(buf);
            Ok(())
        }
    }

    /// X25519 with an ephemeral secret from the seed.
    #[derive(Debug)]
    pub struct SeededX25519;

    impl SupportedKxGroup for SeededX25519 {
        fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, Error> {
            let mut secret = [0u8; 32];
            fill(&mut secret);
            let secret = x25519_dalek::StaticSecret::from(secret);
            let public = x25519_dalek::PublicKey::from(&secret);
            Ok(Box::new(X25519Exchange { secret, public }))
        }

        fn name(&self) -> NamedGroup {
            NamedGroup::X25519
        }
    }

    struct X25519Exchange {
        secret: x25519_dalek::StaticSecret,
        public: x25519_dalek::PublicKey,
    }

    impl ActiveKeyExchange for X25519Exchange {
        fn complete(self: Box<Self>, peer: &[u8]) -> Result<SharedSecret, Error> {
            let peer: [u8; 32] = peer.try_into().map_err(|_| PeerMisbehaved::InvalidKeyShare)?;
            let shared = self.secret.diffie_hellman(&x25519_dalek::PublicKey::from(peer));
            // A low-order peer point yields an all-zero secret (RFC 7748 §6.1), as ring refuses.
            if !shared.was_contributory() {
                return Err(PeerMisbehaved::InvalidKeyShare.into());
            }
            Ok(SharedSecret::from(&shared.as_bytes()[..]))
        }

        fn pub_key(&self) -> &[u8] {
            self.public.as_bytes()
        }

        fn group(&self) -> NamedGroup {
            NamedGroup::X25519
        }
    }

    /// ring's key loading, refusing keys whose signatures would draw from the OS.
    #[derive(Debug)]
    pub struct SeededKeys;

    impl KeyProvider for SeededKeys {
        fn load_private_key(&self, key_der: PrivateKeyDer<'static>) -> Result<Arc<dyn SigningKey>, Error> {
            let key = rustls::crypto::ring::default_provider().key_provider.load_private_key(key_der)?;
            if key.algorithm() != SignatureAlgorithm::ED25519 {
                return Err(Error::General(format!(
                    "under the simulator a TLS key must be Ed25519 (deterministic signatures); this one is {:?}",
                    key.algorithm()
                )));
            }
            Ok(key)
        }
    }
}
