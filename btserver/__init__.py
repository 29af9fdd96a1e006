"""bt-server: a storage site's datasets as torrents, seeded on demand.

catalog (datasets from roots and manifests) → layout (pure plan of farm
links) → farm (symlinks on disk) → metacache (.torrent + fingerprint) →
seeder (one libtorrent session); app (control API), publisher (to the
repository), heartbeat (to the tracker), cli (`bt-server`).
"""
