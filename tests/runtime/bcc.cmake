# BCC's and libbpf-tools' documented command lines against memlat (bcc_command_lines.txt).
memlat_runtime_test(test_bcc_compat.py bcc_command_lines)
