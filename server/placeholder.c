/* Replaced by the server implementation (serve.c, publish.c). */
#include "server/server.h"
int hk_server_placeholder(void);
int hk_server_placeholder(void) { return 0; }
