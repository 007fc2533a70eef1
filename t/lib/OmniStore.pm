package OmniStore;

# What the state-store tests (t/store_*.t) share: one gateway node with
# the admin API (/api/, /metrics) behind omniroute_api_token
# env=OMNI_TEST_API_TOKEN, and the calls they make to it.  Core Perl only.
#
#   OmniStore::node($t, $TOKEN);      after $t->run: the node to talk to
#   chat('alpha/m'); api('GET', '/api/...'); metrics(); metric($name)

use strict;
use warnings;

use JSON::PP;
use OmniTest;

use Exporter 'import';
our @EXPORT_OK = qw(gateway_server chat api metrics metric reasons);

our ($T, $GW, $TOKEN);

# the gateway's server block: /v1/ with the directives of v1 (a list), the
# params location, the admin API at /api/ and /metrics; head: directives
# at the top of the block
sub gateway_server {
    my (%o) = @_;
    my $head = join '', map { "        $_;\n" } @{$o{head} || []};
    my $v1 = join '', map { "            $_;\n" } @{$o{v1} || []};

    return <<"END";
    server {
        listen 127.0.0.1:%%PORT_gw%%;
$head
        location /v1/ {
            omniroute_pass;
$v1        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /api/ {
            omniroute_api;
        }

        location = /metrics {
            omniroute_api;
        }
    }
END
}

# the node (an OmniTest, running) and the admin token the calls use
sub node {
    ($T, $TOKEN) = @_;
    $GW = $T->port('gw');
    return $GW;
}

sub chat {
    my ($model, %h) = @_;
    return $T->post($GW, '/v1/chat/completions',
                    { model => $model, messages => [] }, %h);
}

# an admin call; $body (a hash or array) is sent as JSON
sub api {
    my ($method, $path, $body) = @_;
    my %h = (Authorization => "Bearer $TOKEN");
    if (defined $body) {
        $body = encode_json($body);
        $h{'Content-Type'} = 'application/json';
    }
    my $r = $T->http($GW, OmniTest::request_text($method, $path, $body, %h));
    $r->{json} = eval { decode_json($r->{body}) };
    return $r;
}

# /metrics: { sample => value } of its "NAME VALUE" lines
sub metrics {
    my %v;
    for (split /\n/, api('GET', '/metrics')->{body} // '') {
        $v{$1} = $2 if /^(\S+) (\S+)$/;
    }
    return \%v;
}

sub metric {
    my ($name) = @_;
    my ($v) = (api('GET', '/metrics')->{body} // '')
        =~ /^\Q$name\E (\S+)$/m;
    return $v;
}

# the excluded connections of a diagnostics answer: "conn:reason,..."
sub reasons {
    my ($r) = @_;
    my $doc = OmniTest::json($r) or return '';
    return join ',', map { "$_->{connection}:$_->{reason}" }
        @{$doc->{diagnostics}{excluded} || []};
}

1;
