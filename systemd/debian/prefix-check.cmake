# CPack pre-build script: the package is a /usr package (its conffile is
# /etc/pmcache/pmcached.conf). The unit and the daemon's default name
# pmcached and its configuration under the configured prefix: a package of
# a build configured with another (/usr/local) would install a unit naming
# a binary and a configuration it does not hold.
if(NOT CPACK_PMC_INSTALL_PREFIX STREQUAL "/usr")
	message(FATAL_ERROR "pmcache package: this build is configured with "
		"CMAKE_INSTALL_PREFIX=${CPACK_PMC_INSTALL_PREFIX}; the .deb installs "
		"under /usr and its unit would name ${CPACK_PMC_INSTALL_PREFIX}/sbin/pmcached: "
		"configure with -DCMAKE_INSTALL_PREFIX=/usr")
endif()
