"""Before any transfer: what TARGET names, its record and .torrent, the files each worker takes, the
user's token and peer certificate, how this host reaches the federation."""
