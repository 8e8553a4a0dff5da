# memlat exporter runs as `memlat exporter` (or memlat-exporter): a bare "exporter" would say
# nothing of what it exports.
set(tool_link "")
