#memlat top runs through a link named memtop(the build 's and a local install' s) or
#memlat - top(the Debian package 's), never a bare "top", which is procps' s.
set(tool_link memtop)
