# cmake -DBUILD_DIR=BUILD -DDEB=OUT.deb -P MakeDeb.cmake: the Debian package of a build
# (cmake/Package.cmake says what it holds). The components "memlat" and "debian" are
# installed under /usr into a staging tree, the control file (BUILD/debian/control.in) gets
# the Installed-Size of what was staged and the md5sums are added, and dpkg-deb builds the
# package with every file owned by root.
foreach(var BUILD_DIR DEB)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "MakeDeb.cmake: -D${var}= is missing")
    endif()
endforeach()
set(stage ${BUILD_DIR}/debian/stage)
file(REMOVE_RECURSE ${stage})
file(MAKE_DIRECTORY ${stage}/DEBIAN)
foreach(component memlat debian)
    execute_process(COMMAND ${CMAKE_COMMAND} -E env DESTDIR=${stage}
                            ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix /usr
                            --component ${component}
                    OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
endforeach()
# Directories 755 whatever the umask; install() gave the files their modes.
file(GLOB_RECURSE dirs LIST_DIRECTORIES true ${stage}/*)
list(APPEND dirs ${stage})
foreach(path ${dirs})
    if(IS_DIRECTORY ${path} AND NOT IS_SYMLINK ${path})
        file(CHMOD ${path} DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
             GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
    endif()
endforeach()

# Installed-Size in KiB as dpkg-gencontrol counts it: each file rounded up to a KiB, each
# link and directory one; md5sums of the regular files.
file(GLOB_RECURSE entries LIST_DIRECTORIES true RELATIVE ${stage} ${stage}/usr/*)
list(SORT entries)
set(kib 0)
set(md5sums "")
foreach(entry ${entries})
    set(path ${stage}/${entry})
    if(IS_SYMLINK ${path} OR IS_DIRECTORY ${path})
        math(EXPR kib "${kib} + 1")
    else()
        file(SIZE ${path} bytes)
        math(EXPR kib "${kib} + (${bytes} + 1023) / 1024")
        file(MD5 ${path} md5)
        string(APPEND md5sums "${md5}  ${entry}\n")
    endif()
endforeach()
file(READ ${BUILD_DIR}/debian/control.in control)
file(WRITE ${stage}/DEBIAN/control "${control}Installed-Size: ${kib}\n")
file(WRITE ${stage}/DEBIAN/md5sums "${md5sums}")
file(CHMOD ${stage}/DEBIAN/control ${stage}/DEBIAN/md5sums
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

execute_process(COMMAND dpkg-deb --root-owner-group --build ${stage} ${DEB}.tmp
                OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
file(RENAME ${DEB}.tmp ${DEB})
message(STATUS "${DEB}: ${kib} KiB installed")
