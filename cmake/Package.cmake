# Installing memlat: `cmake --install BUILD` (prefix /usr/local unless --prefix says otherwise)
# and the Debian package, `cmake --build BUILD --target deb` -> BUILD/memlat_VERSION_ARCH.deb
# (cmake/MakeDeb.cmake, prefix /usr; ARCH as Debian names it: amd64, arm64). Under the prefix
# both hold (component "memlat"):
#   sbin/memlat                        the static multi-call binary
#   lib/systemd/system/...             every unit and drop-in of contrib/systemd, with the
#                                      /usr/local/ of their paths turned into the prefix
#   share/memlat/grafana/memlat.json   the Grafana dashboard
#   share/doc/memlat/README.md, share/doc/memlat/docs/*.md and docs/tools/*.md (the pages README
#                                      links), share/doc/memlat/examples/*.env (contrib/systemd's
#                                      templates of /etc/memlat/, which nothing installs by itself)
#   share/man/man8/memlat.8.gz         docs/memlat.8
# `cmake --install` adds (component "local") sbin/LINK -> memlat for each entry's bare link
# (the tools' names, memtop; tools/NAME/tool.cmake), and the LICENSE.
# The package has instead (component "debian", left out of a plain install):
#   sbin/memlat-TOOL -> memlat         the tools' names on Debian: bookworm's libbpf-tools owns
#                                      /usr/sbin/drsnoop, cachestat and numamove (apt-file),
#                                      bpfcc-tools' names end in -bpfcc; memlat-* is nobody's
#   libexec/memlat/TOOL -> memlat      the plain names, off PATH: PATH=/usr/libexec/memlat:$PATH
#                                      runs BCC's command lines unchanged
#   share/man/man8/memlat-TOOL.8.gz -> memlat.8.gz
#   (for every entry of the registry: memlat-top, memlat-exporter too; libexec/ only for the
#   tools whose bare link is their name)
#   share/doc/memlat/copyright, changelog.gz, share/lintian/overrides/memlat (contrib/debian)
# build.deb and runtime.deb_install (tests/) check the package; docs/building.md, "Installing" is the
# user's side of this.

install(TARGETS memlat RUNTIME DESTINATION sbin COMPONENT memlat)

# A symbolic link NAME -> TARGET in DIR under the install prefix (and DESTDIR).
function(memlat_install_link dir name target component)
    install(CODE "
        set(link \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${dir}/${name}\")
        file(MAKE_DIRECTORY \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${dir}\")
        file(CREATE_LINK \"${target}\" \"\${link}\" SYMBOLIC)
        message(STATUS \"Installing: \${link} -> ${target}\")"
        COMPONENT ${component} ${ARGN})
endfunction()

# The units name the binary and the README under /usr/local (where `cmake --install` puts
# them by default); installed elsewhere, they name the prefix they are installed under.
file(GLOB_RECURSE memlat_units RELATIVE ${PROJECT_SOURCE_DIR}/contrib/systemd
     CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/contrib/systemd/*)
list(FILTER memlat_units EXCLUDE REGEX "\\.env$")
foreach(unit ${memlat_units})
    install(CODE "
        set(unit \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system/${unit}\")
        file(READ \"${PROJECT_SOURCE_DIR}/contrib/systemd/${unit}\" text)
        string(REPLACE \"/usr/local/\" \"\${CMAKE_INSTALL_PREFIX}/\" text \"\${text}\")
        file(WRITE \"\${unit}\" \"\${text}\")
        message(STATUS \"Installing: \${unit}\")"
        COMPONENT memlat)
endforeach()
file(GLOB memlat_env_templates CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/contrib/systemd/*.env)
install(FILES ${memlat_env_templates} DESTINATION share/doc/memlat/examples COMPONENT memlat)
install(FILES ${PROJECT_SOURCE_DIR}/contrib/grafana/memlat.json
        DESTINATION share/memlat/grafana COMPONENT memlat)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION share/doc/memlat COMPONENT memlat)
# README's links go to docs/ next to it: the pages keep their places under share/doc/memlat.
file(GLOB memlat_doc_pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
file(GLOB memlat_tool_pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/tools/*.md)
install(FILES ${memlat_doc_pages} DESTINATION share/doc/memlat/docs COMPONENT memlat)
install(FILES ${memlat_tool_pages} DESTINATION share/doc/memlat/docs/tools COMPONENT memlat)
# The manual page (docs/memlat.8), compressed without a time stamp as Debian wants it.
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/memlat.8.gz
                   COMMAND gzip -9nc ${PROJECT_SOURCE_DIR}/docs/memlat.8 > ${CMAKE_BINARY_DIR}/memlat.8.gz
                   DEPENDS ${PROJECT_SOURCE_DIR}/docs/memlat.8
                   COMMENT "manual page memlat.8")
add_custom_target(memlat_man ALL DEPENDS ${CMAKE_BINARY_DIR}/memlat.8.gz)
install(FILES ${CMAKE_BINARY_DIR}/memlat.8.gz DESTINATION share/man/man8 COMPONENT memlat)

foreach(link ${MEMLAT_TOOL_LINKS})
    memlat_install_link(sbin ${link} memlat local)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION share/doc/memlat COMPONENT local)

# ---- the Debian package ----
set(MEMLAT_DEB_MAINTAINER "memlat maintainers <maintainers@users.noreply.a-seed-1d733e4b.example>"
    CACHE STRING "The Maintainer of the Debian package (and of its changelog entry)")
# A native package (no Debian revision): the package is made from this tree, not from a
# released source with Debian's changes on top.
set(MEMLAT_DEB ${CMAKE_BINARY_DIR}/memlat_${PROJECT_VERSION}_${MEMLAT_DEB_ARCH}.deb)

# Every entry as memlat-NAME (memlat top as memlat-top: a bare memtop is left to the local
# install); the BCC names (an entry whose link is its name) also under libexec/memlat.
foreach(tool ${MEMLAT_TOOLS})
    memlat_install_link(sbin memlat-${tool} memlat debian EXCLUDE_FROM_ALL)
    memlat_install_link(share/man/man8 memlat-${tool}.8.gz memlat.8.gz debian EXCLUDE_FROM_ALL)
    if(${tool} IN_LIST MEMLAT_TOOL_LINKS)
        memlat_install_link(libexec/memlat ${tool} ../../sbin/memlat debian EXCLUDE_FROM_ALL)
    endif()
endforeach()
# Debian's changelog of a native package: one entry for this version, dated now (or
# SOURCE_DATE_EPOCH), compressed without a time stamp as Debian policy wants it.
string(TIMESTAMP memlat_deb_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/debian/changelog CONTENT
"memlat (${PROJECT_VERSION}) unstable; urgency=medium

  * Built from the memlat source tree; docs/tools/ says what each tool does.

 -- ${MEMLAT_DEB_MAINTAINER}  ${memlat_deb_date}
")
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/debian/changelog.gz
                   COMMAND gzip -9nc ${CMAKE_BINARY_DIR}/debian/changelog
                           > ${CMAKE_BINARY_DIR}/debian/changelog.gz
                   DEPENDS ${CMAKE_BINARY_DIR}/debian/changelog
                   COMMENT "Debian changelog")
install(FILES ${PROJECT_SOURCE_DIR}/contrib/debian/copyright ${CMAKE_BINARY_DIR}/debian/changelog.gz
        DESTINATION share/doc/memlat COMPONENT debian EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/contrib/debian/lintian-overrides
        DESTINATION share/lintian/overrides RENAME memlat COMPONENT debian EXCLUDE_FROM_ALL)

# The package is made by cmake/MakeDeb.cmake with dpkg-deb: CPack's DEB generator (3.25)
# counts every symbolic link as the size of the file it points to, which made the
# Installed-Size 31 MB for 2.6 MB of files.
# The control file, less Installed-Size (MakeDeb.cmake adds it from the files). Nothing to
# depend on: the binary is static.
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/debian/control.in CONTENT
"Package: memlat
Version: ${PROJECT_VERSION}
Architecture: ${MEMLAT_DEB_ARCH}
Maintainer: ${MEMLAT_DEB_MAINTAINER}
Section: admin
Priority: optional
Description: BPF tools that show where memory management stalls programs
 memlat traces TLB-shootdown IPIs, direct and memory-cgroup reclaim,
 compaction, NUMA migration, the page cache and each process's memory
 stalls with libbpf CO-RE programs, and serves the counts to Prometheus.
 .
 All the tools are one static binary, /usr/sbin/memlat; each is also
 installed as /usr/sbin/memlat-TOOL.
")
add_custom_target(deb
    COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DDEB=${MEMLAT_DEB}
            -P ${PROJECT_SOURCE_DIR}/cmake/MakeDeb.cmake
    DEPENDS memlat memlat_man ${CMAKE_BINARY_DIR}/debian/changelog.gz
    COMMENT "Debian package ${MEMLAT_DEB}"
    VERBATIM)
